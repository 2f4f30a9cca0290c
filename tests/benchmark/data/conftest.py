"""Fixtures: one generated `tiny` benchmark per test session (real files in the real layout)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmark.data.synthetic import generate_benchmark


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A `tiny` benchmark generated with seed 0."""
    out = tmp_path_factory.mktemp("tiny") / "bench"
    generate_benchmark(out, "tiny", 0, workers=2, progress=False)
    return out
