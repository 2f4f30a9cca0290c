"""What the evaluator needs to know about the benchmark directory (``benchmark.info`` finds it)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from benchmark.info import benchmark_json_files
from benchmark.tracks import tracks_needing

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


@lru_cache(maxsize=16)
def track_unavailable(data_dir: Path | None, track: int) -> str | None:
    """Why this evaluator cannot score ``track`` on its benchmark, or None when it can.

    A track whose submissions carry personalisations (track 3) needs, beside the hidden test
    split, the clients' training files: they say which client holds each provider, hence which
    test questions are each client's own. An organiser who copied only ``evaluator/`` would
    otherwise see every such job fail at scoring. A
    directory without a test split (no benchmark configured) is not checked. Cached per process:
    restart the service after fixing the directory.

    Args:
        data_dir: the benchmark directory, or None.
        track: the track number.
    """
    if data_dir is None or track not in tracks_needing("personal"):
        return None
    if test_split_path(data_dir) is None:
        return None
    from benchmark.data import DataError, personal_splits

    try:
        personal_splits(data_dir, "test")
    except (DataError, OSError, ValueError) as exc:
        return str(exc)
    return None
