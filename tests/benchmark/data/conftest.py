"""Fixtures: one generated `tiny` benchmark per test session (real files in the real layout)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_dir(tiny_benchmark: Path) -> Path:
    """The session's `tiny` benchmark (seed 0, see tests/conftest.py)."""
    return tiny_benchmark
