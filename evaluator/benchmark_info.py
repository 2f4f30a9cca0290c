"""What the evaluator needs to know about the benchmark directory (``benchmark.info`` finds it)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmark.info import benchmark_json_files

DEFAULT_CLIENTS = 10


def clients_of(data_dir: Path | None) -> int:
    """K, the number of federated clients of a benchmark (from ``benchmark.json``).

    Args:
        data_dir: the benchmark directory, or None when the service runs without one.

    Returns:
        K, or 10 (the PFL-DocVQA federation) when the directory does not say.
    """
    if data_dir is None:
        return DEFAULT_CLIENTS
    for candidate in benchmark_json_files(data_dir):
        info = json.loads(candidate.read_text())
        for value in (
            info.get("clients"),
            (info.get("parameters") or {}).get("clients"),
            (info.get("generator") or {}).get("clients"),
        ):
            if isinstance(value, bool):
                continue
            if isinstance(value, int) and value > 0:
                return value
            if isinstance(value, list | dict) and value:
                return len(value)
    return DEFAULT_CLIENTS


def test_split_path(data_dir: Path) -> Path | None:
    """The hidden test split's ``.npy`` in a benchmark directory, or None."""
    for candidate in (
        Path(data_dir) / "evaluator" / "imdb_test.npy",
        Path(data_dir) / "imdb_test.npy",
    ):
        if candidate.is_file():
            return candidate
    return None
