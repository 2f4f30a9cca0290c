"""The scoring worker's state machine: rejection, failure and retry, leases, crash recovery."""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file
from sqlalchemy import select, update

from evaluator import crud
from evaluator.core.db import session_scope
from evaluator.queue import TaskQueue
from evaluator.storage import SubmissionStore
from evaluator.tables import Status, Submission, SubmissionEvent, utcnow
from evaluator.worker import JobRunner, reap
from tests.evaluator.factories import details_log, fedavg_log, metadata, small_safetensors


def stored_submission(
    settings, team: str, model: bytes, *, meta: dict | None = None, log: str | None = None
) -> str:  # type: ignore[no-untyped-def]
    """A queued submission stored as the API stores it."""
    store = SubmissionStore(settings.storage_dir)
    meta = meta or metadata()
    with session_scope(settings.db_url) as session:
        team_id = crud.team_by_token(session, token=team).id
        row = crud.reserve_submission(
            session,
            team_id=team_id,
            quota=100,
            track=meta["track"],
            method=meta["method"],
            metadata=meta,
        )
        submission_id = row.id
    incoming = store.incoming(submission_id)
    incoming.mkdir(parents=True)
    (incoming / "model.safetensors").write_bytes(model)
    (incoming / "communication_log.csv").write_text(log or fedavg_log())
    (incoming / "communication_log.jsonl").write_text(details_log(log or fedavg_log()))
    store.commit(submission_id)
    with session_scope(settings.db_url) as session:
        assert crud.transition(
            session,
            submission_id=submission_id,
            from_status=Status.RECEIVED,
            to_status=Status.QUEUED,
        )
    return submission_id


def row_of(settings, submission_id: str) -> Submission:  # type: ignore[no-untyped-def]
    with session_scope(settings.db_url) as session:
        return crud.get_submission(session, submission_id=submission_id)


@pytest.fixture
def queue(settings) -> TaskQueue:  # type: ignore[no-untyped-def]
    return TaskQueue(settings.queue, name=settings.queue_name)


@pytest.fixture
def runner(settings, queue: TaskQueue) -> JobRunner:  # type: ignore[no-untyped-def]
    return JobRunner(settings, queue)


def test_wrong_shapes_are_rejected_with_the_reason(
    runner: JobRunner, settings, teams: dict, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    model = small_safetensors(tmp_path / "m.safetensors").read_bytes()
    submission_id = stored_submission(settings, teams["alpha"], model)
    assert runner.run(submission_id) == "rejected"
    row = row_of(settings, submission_id)
    assert row.status == "rejected"
    assert "does not match the benchmark's VT5 configuration" in row.reason
    assert "unexpected tensors (a.weight, b.bias)" in row.reason
    assert [e.to_status for e in row.events] == ["received", "queued", "scoring", "rejected"]
    assert row.finished_at is not None and row.anls is None
    assert runner.run(submission_id) == "skipped"


def test_nan_weights_are_rejected(
    runner: JobRunner, settings, teams: dict, tiny_reference: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    tensors = load_file(str(tiny_reference / "model.safetensors"))
    name = sorted(tensors)[3]
    tensors[name] = tensors[name].copy()
    tensors[name].flat[7] = np.nan
    save_file(tensors, str(tmp_path / "nan.safetensors"))
    submission_id = stored_submission(
        settings, teams["alpha"], (tmp_path / "nan.safetensors").read_bytes()
    )
    assert runner.run(submission_id) == "rejected"
    assert f"NaN or infinite values ({name})" in row_of(settings, submission_id).reason


def test_log_inconsistent_with_metadata_is_rejected(
    runner: JobRunner, settings, teams: dict, tiny_reference: Path
) -> None:  # type: ignore[no-untyped-def]
    model = (tiny_reference / "model.safetensors").read_bytes()
    submission_id = stored_submission(
        settings, teams["alpha"], model, meta=metadata(clients_per_round=3)
    )
    assert runner.run(submission_id) == "rejected"
    assert "2 clients took part but 3 per round" in row_of(settings, submission_id).reason


def test_internal_error_fails_and_is_retried(
    runner: JobRunner, settings, teams: dict, queue: TaskQueue, tiny_reference: Path
) -> None:  # type: ignore[no-untyped-def]
    # The worker's benchmark directory holds no test split: an error on our side, not the team's.
    model = (tiny_reference / "model.safetensors").read_bytes()
    submission_id = stored_submission(settings, teams["alpha"], model)
    before = queue.pending() + len(queue.huey.scheduled())
    assert runner.run(submission_id) == "retrying"
    row = row_of(settings, submission_id)
    assert row.status == "queued" and row.attempts == 1
    assert [e.to_status for e in row.events][-3:] == ["scoring", "failed", "queued"]
    assert "internal error (" in row.events[-2].detail and "retrying" in row.events[-2].detail
    assert queue.pending() + len(queue.huey.scheduled()) == before + 1
    assert runner.run(submission_id) == "failed"
    row = row_of(settings, submission_id)
    assert row.status == "failed" and row.attempts == 2
    assert row.reason.startswith("internal error (") and "attempt 2 of 2" in row.reason


def test_claim_is_exclusive_under_concurrency(settings, teams: dict, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model = small_safetensors(tmp_path / "m.safetensors").read_bytes()
    submission_id = stored_submission(settings, teams["alpha"], model)
    barrier = threading.Barrier(6)
    wins: list[bool] = []

    def contend(index: int) -> None:
        barrier.wait()
        with session_scope(settings.db_url) as session:
            wins.append(
                crud.claim(
                    session, submission_id=submission_id, worker=f"w{index}", lease_seconds=60
                )
            )

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(wins) == [False] * 5 + [True]
    assert row_of(settings, submission_id).attempts == 1


def test_expired_lease_is_requeued_and_only_one_result_is_kept(
    settings, teams: dict, queue: TaskQueue, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    model = small_safetensors(tmp_path / "m.safetensors").read_bytes()
    submission_id = stored_submission(settings, teams["alpha"], model)
    store = SubmissionStore(settings.storage_dir)
    with session_scope(settings.db_url) as session:
        assert crud.claim(session, submission_id=submission_id, worker="ghost", lease_seconds=60)
    assert reap(settings, queue, store)["requeued"] == 0
    with session_scope(settings.db_url) as session:
        session.execute(
            update(Submission)
            .where(Submission.id == submission_id)
            .values(lease_expires_at=utcnow() - dt.timedelta(seconds=1))
        )
        assert not crud.renew_lease(
            session, submission_id=submission_id, worker="other", lease_seconds=60
        )
    pending = queue.pending()
    assert reap(settings, queue, store)["requeued"] == 1
    assert queue.pending() == pending + 1
    assert row_of(settings, submission_id).status == "queued"
    with session_scope(settings.db_url) as session:
        assert crud.claim(session, submission_id=submission_id, worker="second", lease_seconds=60)
    with session_scope(settings.db_url) as session:
        assert not crud.renew_lease(
            session, submission_id=submission_id, worker="ghost", lease_seconds=60
        )
        assert not crud.transition(
            session,
            submission_id=submission_id,
            from_status=Status.SCORING,
            to_status=Status.FINISHED,
            lease_owner="ghost",
            values={"anls": 0.1},
        )
        assert crud.transition(
            session,
            submission_id=submission_id,
            from_status=Status.SCORING,
            to_status=Status.FINISHED,
            lease_owner="second",
            values={"anls": 0.2},
        )
    row = row_of(settings, submission_id)
    assert row.status == "finished" and row.anls == 0.2 and row.attempts == 2
    assert [e.to_status for e in row.events].count("finished") == 1


def test_worker_lost_too_often_ends_failed(
    settings, teams: dict, queue: TaskQueue, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    submission_id = stored_submission(
        settings, teams["alpha"], small_safetensors(tmp_path / "m.st").read_bytes()
    )
    with session_scope(settings.db_url) as session:
        session.execute(
            update(Submission)
            .where(Submission.id == submission_id)
            .values(
                status="scoring",
                attempts=settings.max_attempts,
                lease_owner="ghost",
                lease_expires_at=utcnow() - dt.timedelta(seconds=5),
            )
        )
    assert reap(settings, queue, SubmissionStore(settings.storage_dir))["failed"] == 1
    row = row_of(settings, submission_id)
    assert row.status == "failed" and "giving up" in row.reason


def test_interrupted_upload_is_cleaned_up(settings, teams: dict, queue: TaskQueue) -> None:  # type: ignore[no-untyped-def]
    store = SubmissionStore(settings.storage_dir)
    with session_scope(settings.db_url) as session:
        team_id = crud.team_by_token(session, token=teams["alpha"]).id
        submission_id = crud.reserve_submission(
            session, team_id=team_id, quota=5, track=0, method="x"
        ).id
        session.execute(
            update(Submission)
            .where(Submission.id == submission_id)
            .values(created_at=utcnow() - dt.timedelta(hours=2))
        )
    store.incoming(submission_id).mkdir(parents=True)
    (store.incoming(submission_id) / "model.safetensors").write_bytes(b"partial")
    assert reap(settings, queue, store)["failed"] == 1
    assert row_of(settings, submission_id).status == "failed"
    assert not store.incoming(submission_id).exists()
    with session_scope(settings.db_url) as session:
        assert crud.used_quota(session, team_id=team_id, now=utcnow()) == 0


def test_queued_submissions_missing_from_the_queue_are_resent(
    settings, teams: dict, queue: TaskQueue, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    submission_id = stored_submission(
        settings, teams["alpha"], small_safetensors(tmp_path / "m.st").read_bytes()
    )
    with session_scope(settings.db_url) as session:
        session.execute(
            update(Submission)
            .where(Submission.id == submission_id)
            .values(queued_at=utcnow() - dt.timedelta(minutes=5))
        )
    queue.huey.flush()
    assert reap(settings, queue, SubmissionStore(settings.storage_dir))["resent"] == 1
    assert queue.pending() == 1
    assert reap(settings, queue, SubmissionStore(settings.storage_dir))["resent"] == 0
    with session_scope(settings.db_url) as session:
        kinds = session.scalars(
            select(SubmissionEvent.to_status).where(SubmissionEvent.submission_id == submission_id)
        ).all()
    assert kinds == ["received", "queued"]
