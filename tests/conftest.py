"""Shared fixtures. Nothing here downloads anything: the hub is switched off for every test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def tiny_benchmark(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One `tiny` benchmark (seed 0) generated per test session, in the real layout."""
    from benchmark.data.synthetic import generate_benchmark

    out = tmp_path_factory.mktemp("tiny") / "bench"
    generate_benchmark(out, "tiny", 0, workers=2, progress=False)
    return out
