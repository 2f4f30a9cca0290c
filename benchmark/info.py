"""``benchmark.json``: where a benchmark directory keeps it and what the kit reads from it.

``pflkit data generate`` writes ``DIR/benchmark.json`` (generator parameters, clients, kit
version; ``pflkit data threshold`` adds the track-1 threshold); an evaluator's copy may sit in
``DIR/evaluator/``. Every reader finds it through :func:`find_benchmark_json`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FILENAME = "benchmark.json"


def benchmark_json_files(data_dir: str | Path) -> list[Path]:
    """The directory's ``benchmark.json`` files that exist, ``DIR/`` first, then ``DIR/evaluator/``.

    Args:
        data_dir: the benchmark directory.

    Returns:
        The files, in that order.
    """
    candidates = (Path(data_dir) / FILENAME, Path(data_dir) / "evaluator" / FILENAME)
    return [candidate for candidate in candidates if candidate.is_file()]


def find_benchmark_json(data_dir: str | Path) -> Path | None:
    """The benchmark directory's ``benchmark.json`` (the first of :func:`benchmark_json_files`).

    Args:
        data_dir: the benchmark directory.

    Returns:
        The file, or ``None`` when there is none.
    """
    files = benchmark_json_files(data_dir)
    return files[0] if files else None



def stated_value(data_dir: str | Path, key: str) -> tuple[Any, Path] | None:
    """The value a benchmark directory states for ``key``, from the first file that states it.

    Args:
        data_dir: the benchmark directory.
        key: a top-level key of ``benchmark.json``.

    Returns:
        ``(value, file)``, or ``None`` when no ``benchmark.json`` of the directory states it.
    """
    for candidate in benchmark_json_files(data_dir):
        value = json.loads(candidate.read_text(encoding="utf-8")).get(key)
        if value is not None:
            return value, candidate
    return None
