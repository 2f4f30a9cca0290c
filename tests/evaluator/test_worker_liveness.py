"""Issue 46: the silent stall. With no live scoring worker the API still takes uploads (the
queue is durable), but ``/readyz`` answers 503 naming why, and a queued submission's status
says that it waits for a worker and since when; a worker that beats makes both go away; a
worker killed silently stops counting after three missed beats; a database behind its
migrations is named too. On SQLite and PostgreSQL, against the real API on localhost with real
worker registrations (``WorkerPresence``, the worker's own heartbeat thread). And a real
``pflkit serve`` whose embedded worker refuses to start exits non-zero with the worker's
reason instead of serving uploads no one will score."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import signal
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import update

from evaluator import client, crud
from evaluator.core.db import alembic_config, code_heads, session_scope
from evaluator.tables import Status, Worker, WorkerState
from evaluator.worker.liveness import WorkerPresence
from tests.evaluator.conftest import LiveServer
from tests.evaluator.factories import write_benchmark
from tests.evaluator.service import Service, service_env
from tests.evaluator.test_api import upload


def _ready(server: LiveServer) -> httpx.Response:
    return httpx.get(f"{server.url}/readyz")


def _status(server: LiveServer, token: str, submission_id: str) -> dict:
    return httpx.get(
        f"{server.url}/api/v1/submissions/{submission_id}",
        headers={"Authorization": f"Bearer {token}"},
    ).json()


def _wait(predicate, what: str, timeout: float = 10.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what} did not happen within {timeout} s")


def test_no_live_worker_makes_readyz_503_and_queued_submissions_say_they_wait(
    settings, teams: dict, tiny_reference
) -> None:  # type: ignore[no-untyped-def]
    settings = settings.model_copy(update={"worker_beat_seconds": 0.3})
    model = (tiny_reference / "model.safetensors").read_bytes()
    with LiveServer(settings) as server:
        assert httpx.get(f"{server.url}/healthz").status_code == 200  # liveness is unchanged
        answer = _ready(server)
        assert answer.status_code == 503
        body = answer.json()
        assert body["status"] == "not ready" and body["live_workers"] == 0
        assert body["reasons"] == [
            "no scoring worker has ever started: start `pflkit worker` (or `pflkit serve` "
            "without --no-worker)"
        ]

        accepted = upload(server.url, teams["alpha"], model=model)
        assert accepted.status_code == 202, accepted.text  # the queue is durable
        submission_id = accepted.json()["id"]
        view = _status(server, teams["alpha"], submission_id)
        assert view["status"] == "queued"
        since = dt.datetime.fromisoformat(view["waiting_for_worker_since"])
        assert since == dt.datetime.fromisoformat(view["queued_at"])
        assert view["waiting"].startswith("waiting for a scoring worker since ")
        listed = httpx.get(
            f"{server.url}/api/v1/submissions",
            headers={"Authorization": f"Bearer {teams['alpha']}"},
        ).json()["submissions"]
        assert listed[0]["waiting_for_worker_since"] == view["waiting_for_worker_since"]
        with pytest.raises(client.SubmitError) as waited:  # pflkit submit --wait says it too
            client.wait(submission_id, server=server.url, token=teams["alpha"], timeout=0.3,
                        interval=0.1)  # fmt: skip
        assert str(waited.value).startswith(
            f"submission {submission_id} still queued after 0 s: waiting for a scoring worker "
            "since "
        )

        # A worker registers: starting (scoring the base) is not live yet.
        presence = WorkerPresence(settings, embedded=False).register()
        body = _ready(server).json()
        assert body["starting_workers"] == 1 and "1 starting" in body["reasons"][0]
        presence.mark(WorkerState.READY)
        answer = _wait(lambda: (r := _ready(server)).status_code == 200 and r, "readiness")
        assert answer.json() == {
            "status": "ready", "database": "ok", "live_workers": 1, "starting_workers": 0,
            "reasons": [],
        }  # fmt: skip
        view = _wait(
            lambda: (v := _status(server, teams["alpha"], submission_id))["waiting"] is None and v,
            "the waiting note to go",
        )
        assert view["waiting_for_worker_since"] is None and view["status"] == "queued"
        presence.hold(submission_id)
        with session_scope(settings.db_url) as session:
            row = session.get(Worker, presence.worker)
            assert row.holding == submission_id and row.state == "ready" and row.embedded is False

        # The worker is killed (it stops beating): after three missed beats it is not live.
        presence.stopped.set()
        presence.join()
        killed_at = time.monotonic()
        answer = _wait(lambda: (r := _ready(server)).status_code == 503 and r, "staleness")
        assert time.monotonic() - killed_at >= 2 * settings.worker_beat_seconds
        assert "no scoring worker has beaten in the last 0.9 s" in answer.json()["reasons"][0]
        view = _wait(
            lambda: (v := _status(server, teams["alpha"], submission_id))["waiting"] and v,
            "the waiting note to return",
        )
        with session_scope(settings.db_url) as session:
            last_beat = session.get(Worker, presence.worker).last_beat_at
        # It waits since the last worker stopped, not since it was queued.
        assert dt.datetime.fromisoformat(view["waiting_for_worker_since"]) == last_beat

        # A worker that refuses to start says why, there and on /readyz.
        refusing = WorkerPresence(settings, embedded=True).register()
        refusing.stop(WorkerState.REFUSED, "the track-1 threshold 0.0000 is at or below the base")
        body = _ready(server).json()
        assert body["reasons"][0].startswith(f"no scoring worker is live: worker {refusing.worker} "
                                             "refused to start at ")  # fmt: skip
        assert body["reasons"][0].endswith(": the track-1 threshold 0.0000 is at or below the base")
        # The team is not shown the organisers' reason.
        view = _status(server, teams["alpha"], submission_id)
        assert "threshold" not in view["waiting"]


def test_a_database_behind_its_migrations_is_not_ready(settings) -> None:  # type: ignore[no-untyped-def]
    from alembic import command

    with LiveServer(settings) as server:
        with session_scope(settings.db_url) as session:
            crud.register_worker(session, name="w", host="h", pid=1, embedded=False)
            crud.set_worker_state(session, name="w", state=WorkerState.READY)
        assert _ready(server).status_code == 200
        with session_scope(settings.db_url) as session:  # a beat from long ago: not live
            session.execute(
                update(Worker).values(last_beat_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
            )
        assert _ready(server).status_code == 503
        config = alembic_config(settings.db_url)
        command.stamp(config, "0007")  # marked older, the workers' table still there
        reasons = _ready(server).json()["reasons"]
        assert reasons[0].startswith("the database is at migration 0007 and this code needs ")
        assert reasons[1].startswith("no scoring worker has beaten in the last")
        command.stamp(config, "head")
        command.downgrade(config, "0007")  # really older: no workers' table
        answer = _ready(server)
        assert answer.status_code == 503
        body = answer.json()
        assert body["database"] == "behind its migrations"
        (head,) = code_heads()
        assert body["reasons"][0].startswith(
            f"the database is at migration 0007 and this code needs {head}: restart `pflkit "
            "serve` (it migrates at start-up)"
        )
        assert httpx.get(f"{server.url}/healthz").status_code == 200


def test_serve_exits_non_zero_with_the_reason_of_its_refusing_worker(
    tmp_path: Path, tiny_benchmark: Path, tiny_reference: Path
) -> None:
    data = tmp_path / "data"
    shutil.copytree(tiny_benchmark, data)
    summary = json.loads((data / "benchmark.json").read_text())
    (data / "benchmark.json").write_text(json.dumps({**summary, "track1_threshold": 0.0}))
    database_url = f"sqlite:///{tmp_path / 'evaluator.db'}"
    env = service_env(tmp_path, reference=tiny_reference, data=data, database_url=database_url)
    service = Service(tmp_path / "serve.log", env)
    try:
        service.wait_healthy()
        started = time.monotonic()
        # While the worker starts (scoring the base), the API is up but not ready.
        ready = httpx.get(f"{service.url}/readyz")
        assert ready.status_code == 503 and ready.json()["live_workers"] == 0
        service.process.wait(timeout=180)
        log = service.output()
        assert service.process.returncode == 1, log
        last = log.strip().splitlines()[-1]
        assert last.startswith("Error: the embedded scoring worker refused to start: the track-1 "
                               "threshold 0.0000 is at or below the base model's own test ANLS")  # fmt: skip
        print(f"serve exited {time.monotonic() - started:.1f} s after it was healthy")
    finally:
        service.stop()
    with session_scope(database_url) as session:
        (row,) = crud.list_workers(session)
        assert row.state == "refused" and row.embedded is True
        assert row.reason in last


def test_the_organisers_see_workers_queue_and_failures(
    settings, teams: dict, tiny_reference
) -> None:  # type: ignore[no-untyped-def]
    from pflkit.app import create_app

    model = (tiny_reference / "model.safetensors").read_bytes()
    organiser = {"Authorization": f"Bearer {teams['org']}"}
    with LiveServer(settings, app=create_app(settings)) as server:
        first = upload(server.url, teams["alpha"], model=model).json()["id"]
        other = tiny_reference.parent / "other.safetensors"
        if not other.exists():
            from safetensors.numpy import load_file, save_file

            tensors = load_file(str(tiny_reference / "model.safetensors"))
            name = sorted(tensors)[0]
            tensors[name] = tensors[name] + 1.0
            save_file(tensors, str(other))
        second = upload(server.url, teams["beta"], model=other.read_bytes()).json()["id"]
        presence = WorkerPresence(settings, embedded=False).register()
        presence.mark(WorkerState.READY)
        with session_scope(settings.db_url) as session:
            assert crud.claim(session, submission_id=first, worker="w", lease_seconds=60)
        presence.hold(first)
        with session_scope(settings.db_url) as session:
            crud.transition(
                session, submission_id=first, from_status=Status.SCORING, to_status=Status.FAILED,
                detail="internal error (ValueError) on attempt 1 of 2", lease_owner="w",
            )  # fmt: skip
        facts = httpx.get(f"{server.url}/api/v1/leaderboard/organiser", headers=organiser).json()
        operations = facts["operations"]
        assert operations["live_workers"] == 1 and operations["queue_depth"] == 1
        assert operations["oldest_queued_seconds"] >= 0
        (worker,) = operations["workers"]
        assert worker["name"] == presence.worker and worker["holding"] == [first]
        assert worker["state"] == "ready" and worker["live"] is True
        (failure,) = operations["failures"]
        assert failure["submission"] == first and failure["kind"] == "internal_error"

        presence.stop(WorkerState.REFUSED, "a reason of its own")
        login = httpx.post(
            f"{server.url}/leaderboard/organiser/login", data={"token": teams["org"]}
        )
        cookies = {"pflkit_session": login.cookies["pflkit_session"]}
        page = httpx.get(f"{server.url}/leaderboard/organiser", cookies=cookies).text
        assert "0 live workers: nothing will be scored until one starts" in page
        assert "1 submission waiting, the oldest for " in page
        assert f"<td>{presence.worker}</td>" in page and "refused: a reason of its own" in page
        assert "internal error (ValueError) on attempt 1 of 2" in page
        assert second in page


def test_serve_stops_when_its_ready_worker_dies(tmp_path: Path, tiny_reference: Path) -> None:
    data = write_benchmark(tmp_path / "bench", questions=4)
    env = service_env(tmp_path, reference=tiny_reference, data=data,
                      database_url=f"sqlite:///{tmp_path / 'evaluator.db'}")  # fmt: skip
    env["PFLKIT_EVALUATOR_WORKER_BEAT_SECONDS"] = "0.5"
    service = Service(tmp_path / "serve.log", env)
    try:
        service.wait_healthy()
        _wait(lambda: httpx.get(f"{service.url}/readyz").status_code == 200, "readiness", 120)
        (worker,) = Path(f"/proc/{service.process.pid}/task/{service.process.pid}/children"
                         ).read_text().split()  # fmt: skip
        os.kill(int(worker), signal.SIGKILL)  # as the OOM killer would
        service.process.wait(timeout=60)
        assert service.process.returncode == 1, service.output()
        assert service.output().strip().splitlines()[-1] == (
            "Error: the embedded scoring worker exited (signal 9); its log is above. Run "
            "`pflkit serve --no-worker` with `pflkit worker` processes to keep the API up "
            "without it"
        )
    finally:
        service.stop()


def test_a_state_change_lost_to_the_database_is_written_at_the_next_beat(settings) -> None:  # type: ignore[no-untyped-def]
    settings = settings.model_copy(update={"worker_beat_seconds": 0.2})
    presence = WorkerPresence(settings, embedded=False).register()
    try:
        presence.mark(WorkerState.READY)
        with session_scope(settings.db_url) as session:  # as if that write had been lost
            session.execute(update(Worker).values(state=WorkerState.STARTING.value))

        def state() -> str:
            with session_scope(settings.db_url) as session:
                return session.get(Worker, presence.worker).state

        assert _wait(lambda: state() == "ready", "the next beat to restore the state", 5)
    finally:
        presence.stop()
    assert state() == "stopped"
