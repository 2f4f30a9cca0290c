"""`pflkit serve` stops cleanly on SIGTERM and SIGINT: the embedded worker goes with it."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.evaluator.factories import write_benchmark
from tests.evaluator.service import Service, service_env


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_serve_stops_its_worker_on_signal(tmp_path: Path, tiny_reference: Path, signum) -> None:  # type: ignore[no-untyped-def]
    data = write_benchmark(tmp_path / "bench", questions=4)
    env = service_env(tmp_path, reference=tiny_reference, data=data,
                      database_url=f"sqlite:///{tmp_path / 'evaluator.db'}")  # fmt: skip
    env["PFLKIT_EVALUATOR_REAP_INTERVAL_SECONDS"] = "30"  # the parent watch cannot be the cause
    env["PFLKIT_EVALUATOR_LEASE_SECONDS"] = "60"
    service = Service(tmp_path / "serve.log", env)
    try:
        service.wait_healthy()
        workers = _children(service.process.pid)
        assert len(workers) == 1, service.output()
        started = time.monotonic()
        os.kill(service.process.pid, signum)  # the serve process only, not its group
        service.process.wait(timeout=30)
        deadline = time.monotonic() + 5
        while _alive(workers[0]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(workers[0]), f"worker still running\\n{service.output()}"
        assert time.monotonic() - started < 8
    finally:
        service.stop()
