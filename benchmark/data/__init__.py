"""Benchmark data: the real PFL-DocVQA layout reader/writer and the synthetic generator.

`load_split` returns a `datasets.Dataset` (imported lazily, so importing this package is cheap);
`personal_splits` gives each client's own val/test questions (track 3).
The generator lives in `benchmark.data.synthetic`.

The names are imported on first use, so ``pflkit data --help`` (whose command group lives in
`benchmark.data.cli`) does not load numpy.
"""

from __future__ import annotations

from benchmark.lazy_exports import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, {
    "errors": ("DataError", "DataFileNotFoundError"),
    "imdb": ("read_data_points", "read_imdb", "write_bytes", "write_data_points", "write_imdb"),
    "personal": ("PersonalSplits", "client_of_provider", "personal_splits"),
    "reader": ("count_clients", "find_split", "load_split", "provider_rows"),
})  # fmt: skip
