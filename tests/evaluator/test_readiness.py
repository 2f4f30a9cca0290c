"""Issue 36: the service checks its own set-up before it scores.

A real ``pflkit serve --no-worker`` and ``pflkit worker`` on the tiny benchmark (no canaries)
with the tiny reference model: with a track-1 threshold at or below the base's own test ANLS
(the untouched base with 1-byte messages would rank first) the worker scores the base once and
refuses to start, ``/readyz`` answers 503 with its reason (issue 46), and the organiser page
warns in red; with a threshold above it, the warning is gone. The audit's
absence is logged and said on the organiser and track-2 pages, and the rules text says what
the evaluator checks (the stale "not checked against the checkpoint" sentence is gone).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import httpx
from markupsafe import escape

from evaluator.readiness import read_readiness, threshold_problem, track2_checks
from evaluator.validation.coverage import BYTES_CHECKED
from tests.evaluator.service import Process, Service, create_team, service_env

STALE = "not checked against the checkpoint"


def _wait_for(predicate, what: str, service: Service, timeout: float = 180) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"{what} did not happen:\n{service.output()}")


def _set_threshold(data: Path, value: float) -> None:
    summary = json.loads((data / "benchmark.json").read_text())
    (data / "benchmark.json").write_text(json.dumps({**summary, "track1_threshold": value}))


def test_a_threshold_at_the_base_stops_the_worker_and_warns_the_organisers(
    tmp_path: Path, tiny_benchmark: Path, tiny_reference: Path
) -> None:
    data = tmp_path / "data"
    shutil.copytree(tiny_benchmark, data)
    _set_threshold(data, 0.0)  # no model scores below 0: at or below any base
    database_url = f"sqlite:///{tmp_path / 'evaluator.db'}"
    env = service_env(tmp_path, reference=tiny_reference, data=data, database_url=database_url)
    organiser = create_team(database_url, "org", organiser=True)
    # Several machines: the API alone, and a `pflkit worker` that refuses to start (issue 46:
    # the API stays up, but /readyz says why nothing will be scored).
    service = Service(tmp_path / "serve.log", env, "--no-worker")
    worker = Process(["worker"], tmp_path / "worker.log", env)
    try:
        service.wait_healthy()
        worker.process.wait(timeout=180)
        log = worker.output()
        assert worker.process.returncode == 1, log
        assert "refusing to start" in log
        assert "at or below the base model's own test ANLS" in log
        assert "the benchmark has no canaries: the privacy audit cannot run" in log
        assert "worker ready" not in log
        readiness = read_readiness(tmp_path / "storage")
        assert readiness is not None and readiness.threshold == 0.0
        assert readiness.canaries is False and 0.0 <= readiness.base_test_anls <= 1.0
        problem = threshold_problem(0.0, readiness.base_test_anls)
        ready = httpx.get(f"{service.url}/readyz")
        assert ready.status_code == 503
        reason = ready.json()["reasons"][0]
        assert (
            reason.startswith("no scoring worker is live: worker ")
            and " refused to start at " in reason
        )
        assert reason.endswith(f": {problem}")

        login = httpx.post(f"{service.url}/leaderboard/organiser/login",
                           data={"token": organiser})  # fmt: skip
        assert login.status_code == 303
        cookies = {"pflkit_session": login.cookies["pflkit_session"]}
        page = httpx.get(f"{service.url}/leaderboard/organiser", cookies=cookies).text
        assert problem is not None
        assert '<p class="bad" id="threshold-warning">' in page
        assert f"{readiness.base_test_anls:.4f}" in page
        assert '<p id="canaries" class="bad">The benchmark has no canaries' in page
        facts = httpx.get(f"{service.url}/api/v1/leaderboard/organiser",
                          headers={"Authorization": f"Bearer {organiser}"}).json()["service"]  # fmt: skip
        assert facts["threshold_problem"] == problem and facts["canaries"] is False

        board = httpx.get(f"{service.url}/leaderboard").text
        assert STALE not in board and str(escape(BYTES_CHECKED)) in board
        assert str(escape(track2_checks(False))) in board and "privacy audit cannot run" in board

        # The organisers set a threshold above the base: the page reads it again, no warning.
        _set_threshold(data, 0.9)
        page = httpx.get(f"{service.url}/leaderboard/organiser", cookies=cookies).text
        assert "Track-1 threshold 0.9000" in page and "threshold-warning" not in page
    finally:
        worker.stop()
        service.stop()


def test_the_track2_text_names_the_audit_when_the_benchmark_has_canaries() -> None:
    assert "canary audit" in track2_checks(True) and "cannot run" not in track2_checks(True)
    assert "cannot run" in track2_checks(False)
    assert threshold_problem(0.5, 0.4) is None and threshold_problem(0.5, None) is None
    assert "at or below" in threshold_problem(0.4, 0.4)  # type: ignore[operator]
