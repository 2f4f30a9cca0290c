"""The scoring leases: a worker's claim and heartbeat, and the reaper's queries and moves.

A job is claimed ``queued -> scoring`` with a lease the worker's heartbeat renews; a job whose
lease expired (its worker died) is put back to ``queued``, or ``failed`` after too many lost
workers (:func:`requeue_expired`).
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from evaluator.crud.board import board_changed
from evaluator.tables import Status, Submission, SubmissionEvent, utcnow


def claim(session: Session, *, submission_id: str, worker: str, lease_seconds: float) -> bool:
    """Take the scoring lease of a queued submission.

    Jobs whose worker died are put back to ``queued`` by the reaper first, so every claim is a
    ``queued -> scoring`` transition.

    Args:
        session: open session (committed by the caller).
        submission_id: the submission.
        worker: identifier of the claiming worker.
        lease_seconds: lease length; renewed by :func:`renew_lease`.

    Returns:
        Whether this worker now owns the job.
    """
    now = utcnow()
    statement = (
        update(Submission)
        .where(Submission.id == submission_id, Submission.status == Status.QUEUED.value)
        .values(
            status=Status.SCORING.value,
            lease_owner=worker,
            lease_expires_at=now + dt.timedelta(seconds=lease_seconds),
            attempts=Submission.attempts + 1,
            scoring_started_at=now,
            updated_at=now,
        )
        .execution_options(synchronize_session=False)
    )
    if session.execute(statement).rowcount != 1:
        return False
    session.add(
        SubmissionEvent(
            submission_id=submission_id,
            from_status=Status.QUEUED.value,
            to_status=Status.SCORING.value,
            at=now,
            worker=worker,
        )
    )
    board_changed(session, submission_id=submission_id)
    return True


def renew_lease(session: Session, *, submission_id: str, worker: str, lease_seconds: float) -> bool:
    """Extend a held lease (heartbeat); False if the worker lost it."""
    now = utcnow()
    result = session.execute(
        update(Submission)
        .where(
            Submission.id == submission_id,
            Submission.status == Status.SCORING.value,
            Submission.lease_owner == worker,
        )
        .values(lease_expires_at=now + dt.timedelta(seconds=lease_seconds))
        .execution_options(synchronize_session=False)
    )
    return result.rowcount == 1


def expired_leases(session: Session, *, now: dt.datetime | None = None) -> list[str]:
    """Submissions in ``scoring`` whose worker stopped renewing its lease."""
    now = now or utcnow()
    return list(
        session.scalars(
            select(Submission.id).where(
                Submission.status == Status.SCORING.value, Submission.lease_expires_at < now
            )
        )
    )


def requeue_expired(
    session: Session, *, submission_id: str, now: dt.datetime, max_attempts: int
) -> Status | None:
    """Move a job whose lease expired back to ``queued``, or to ``failed`` after
    ``max_attempts`` lost workers (the reaper's transition).

    Args:
        session: open session (committed by the caller).
        submission_id: the submission.
        now: the reaper's clock; the lease must have expired before it.
        max_attempts: attempts after which the job is given up.

    Returns:
        The new state, or None when the job was not (or no longer) expired.
    """
    row = session.get(Submission, submission_id)
    if row is None:
        return None
    give_up = row.attempts >= max_attempts
    target = Status.FAILED if give_up else Status.QUEUED
    detail = (
        f"worker lost {row.attempts} times; giving up"
        if give_up
        else "worker stopped renewing its lease; re-queued"
    )
    moved = session.execute(
        update(Submission)
        .where(
            Submission.id == submission_id,
            Submission.status == Status.SCORING.value,
            Submission.lease_expires_at < now,
        )
        .values(
            status=target.value,
            updated_at=now,
            lease_owner=None,
            lease_expires_at=None,
            **({"reason": detail, "finished_at": now} if give_up else {"queued_at": now}),
        )
        .execution_options(synchronize_session=False)
    ).rowcount
    if moved != 1:
        return None
    session.add(
        SubmissionEvent(
            submission_id=submission_id,
            from_status=Status.SCORING.value,
            to_status=target.value,
            at=now,
            detail=detail,
        )
    )
    board_changed(session, submission_id=submission_id)
    return target


def stale_received(session: Session, *, older_than: dt.datetime) -> list[str]:
    """Submissions whose upload started before ``older_than`` and never completed."""
    return list(
        session.scalars(
            select(Submission.id).where(
                Submission.status == Status.RECEIVED.value, Submission.created_at < older_than
            )
        )
    )


def queued(session: Session, *, older_than: dt.datetime | None = None) -> list[str]:
    """Queued submissions (optionally only those queued before ``older_than``), oldest first."""
    statement = select(Submission.id).where(Submission.status == Status.QUEUED.value)
    if older_than is not None:
        statement = statement.where(Submission.queued_at < older_than)
    return list(session.scalars(statement.order_by(Submission.queued_at)))
