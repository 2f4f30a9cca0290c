"""Shared fixtures. Nothing here downloads anything: the hub is switched off for every test."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


#: The timeout of a test's plain ``httpx`` call that names none. Tests check what the server
#: answers, not how fast (``make bench`` measures that), and on a loaded 2-core machine a page
#: that draws plots can take longer than httpx's default of 5 s.
TEST_HTTP_TIMEOUT = 60.0


def _patient(call: Callable) -> Callable:
    @functools.wraps(call)
    def with_timeout(*args, **kwargs):  # type: ignore[no-untyped-def]
        kwargs.setdefault("timeout", TEST_HTTP_TIMEOUT)
        return call(*args, **kwargs)

    return with_timeout


@pytest.fixture(autouse=True)
def patient_http(monkeypatch: pytest.MonkeyPatch) -> None:
    """``httpx.get``/``post``/... wait up to :data:`TEST_HTTP_TIMEOUT` unless a test says."""
    for name in ("get", "post", "put", "patch", "delete", "request"):
        monkeypatch.setattr(httpx, name, _patient(getattr(httpx, name)))


@pytest.fixture(scope="session")
def tiny_benchmark(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One `tiny` benchmark (seed 0) generated per test session, in the real layout."""
    from benchmark.data.synthetic import generate_benchmark

    out = tmp_path_factory.mktemp("tiny") / "bench"
    generate_benchmark(out, "tiny", 0, workers=2, progress=False)
    return out
