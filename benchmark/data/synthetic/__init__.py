"""Synthetic mini-PFL-DocVQA: rendered invoices of federated providers and a public corpus.

Public API: `generate_benchmark` (write a benchmark directory), `public_document` and
`public_records` (generate public-corpus documents in memory, e.g. to stream pre-training data),
`SCALES`.
"""

from benchmark.data.synthetic.benchmark import generate_benchmark
from benchmark.data.synthetic.public import public_document, public_records
from benchmark.data.synthetic.scales import SCALES, Scale

__all__ = ["SCALES", "Scale", "generate_benchmark", "public_document", "public_records"]
