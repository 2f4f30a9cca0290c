"""Benchmark data: the real PFL-DocVQA layout reader/writer and the synthetic generator.

`load_split` returns a `datasets.Dataset` (imported lazily, so importing this package is cheap);
`personal_splits` gives each client's own val/test questions (track 3).
The generator lives in `benchmark.data.synthetic`.
"""

from benchmark.data.errors import DataError, DataFileNotFoundError
from benchmark.data.imdb import (
    read_data_points,
    read_imdb,
    write_bytes,
    write_data_points,
    write_imdb,
)
from benchmark.data.personal import PersonalSplits, client_of_provider, personal_splits
from benchmark.data.reader import count_clients, find_split, load_split, provider_rows

__all__ = [
    "DataError",
    "DataFileNotFoundError",
    "PersonalSplits",
    "client_of_provider",
    "count_clients",
    "find_split",
    "load_split",
    "personal_splits",
    "provider_rows",
    "read_data_points",
    "read_imdb",
    "write_bytes",
    "write_data_points",
    "write_imdb",
]
