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


#: the device of the tests marked ``cuda``: a GPU (``cuda``, ``cuda:N``), or ``cpu`` for the
#: CPU rehearsal of ``make gpu-check``
TEST_DEVICE = os.environ.get("PFLKIT_TEST_DEVICE", "cuda")


def _device_usable(device: str) -> bool:
    import torch

    return device == "cpu" or (device.startswith("cuda") and torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``cuda`` are skipped where :data:`TEST_DEVICE` is not usable."""
    marked = [item for item in items if item.get_closest_marker("cuda")]
    if marked and not _device_usable(TEST_DEVICE):
        skip = pytest.mark.skip(reason=f"PFLKIT_TEST_DEVICE={TEST_DEVICE}: torch sees no such device")
        for item in marked:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def test_device() -> str:
    """The device of the tests marked ``cuda`` (:data:`TEST_DEVICE`)."""
    return TEST_DEVICE


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread_per_worker() -> None:
    """Under ``make test``'s xdist workers (one per core), each worker's torch computes on one
    thread: two workers of torch's default two threads on two cores oversubscribe them, and a
    tiny model's step then waits on the other worker's threads. A test that needs more threads
    sets them itself (and puts them back)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        torch.set_num_threads(1)


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
