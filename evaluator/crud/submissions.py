"""Submissions: reservation under the quota, the state machine, re-scores and reads.

Every state change of a submission goes through :func:`transition`, which checks the expected
current state in the ``UPDATE``'s ``WHERE`` clause, so two processes can never both move the
same submission: whoever's update matches a row wins, the other sees ``False``.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session, joinedload, selectinload

from evaluator.crud.board import board_changed
from evaluator.crud.figures import split_figures, write_figures
from evaluator.crud.quota import QuotaExceeded, used_quota
from evaluator.crud.teams import lock_team
from evaluator.tables import TERMINAL, Status, Submission, SubmissionEvent, utcnow

_TIMESTAMP_OF = {
    Status.QUEUED: "queued_at",
    Status.SCORING: "scoring_started_at",
    Status.FINISHED: "finished_at",
    Status.REJECTED: "finished_at",
    Status.FAILED: "finished_at",
}


def reserve_submission(
    session: Session,
    *,
    team_id: int,
    quota: int,
    track: int,
    method: str,
    description: str = "",
    metadata: dict[str, Any] | None = None,
) -> Submission:
    """Check the daily quota and create a ``received`` submission, atomically per team.

    The first statement updates the team's row: on PostgreSQL that takes the row lock, on SQLite
    the database write lock, so concurrent uploads of one team are counted one after the other.
    The caller commits right away to release the lock.

    Args:
        session: a session with no transaction in progress.
        team_id: the uploading team.
        quota: submissions allowed per UTC day.
        track: a `benchmark.tracks` number.
        method: short method name.
        description: free text.
        metadata: the upload's metadata object.

    Returns:
        The new submission (flushed, not committed).

    Raises:
        QuotaExceeded: the team already has ``quota`` counted submissions today.
    """
    lock_team(session, team_id=team_id)
    now = utcnow()
    used = used_quota(session, team_id=team_id, now=now)
    if used >= quota:
        raise QuotaExceeded(
            f"daily quota of {quota} submissions reached ({used} today, failed and rejected "
            "ones excluded); try again after 00:00 UTC"
        )
    submission = Submission(
        id=str(uuid.uuid4()),
        team_id=team_id,
        track=track,
        method=method,
        description=description,
        submission_metadata=metadata or {},
        status=Status.RECEIVED.value,
        created_at=now,
        updated_at=now,
        attempts=0,
        has_privacy=False,
        hidden=False,
    )
    session.add(submission)
    session.add(
        SubmissionEvent(
            submission_id=submission.id,
            from_status=None,
            to_status=Status.RECEIVED.value,
            at=now,
            detail="upload started",
        )
    )
    session.flush()
    board_changed(session, submission_id=submission.id)
    return submission


def delete_submission(session: Session, *, submission_id: str) -> None:
    """Remove a submission whose upload did not complete (nothing half-stored remains)."""
    row = session.get(Submission, submission_id)
    if row is not None:
        session.delete(row)
        session.flush()
        board_changed(session, submission_id=None)


def transition(
    session: Session,
    *,
    submission_id: str,
    from_status: Status | tuple[Status, ...],
    to_status: Status,
    detail: str | None = None,
    worker: str | None = None,
    lease_owner: str | None = None,
    values: dict[str, Any] | None = None,
) -> bool:
    """Move a submission from one of ``from_status`` to ``to_status`` if it is still there.

    Args:
        session: open session (committed by the caller).
        submission_id: the submission.
        from_status: the state (or states) the caller expects it to be in.
        to_status: the new state.
        detail: reason or note recorded with the transition (and as ``reason`` when the new
            state is rejected or failed).
        worker: the worker making the change, recorded in the event.
        lease_owner: when given, the update only applies while this worker holds the lease.
        values: further columns to set in the same update, and track figures
            (``benchmark.tracks.Track.figures``, written to ``submission_figures``).

    Returns:
        Whether the submission was in an expected state (and is now in ``to_status``).
    """
    expected = (from_status,) if isinstance(from_status, Status) else from_status
    now = utcnow()
    columns: dict[str, Any] = {"status": to_status.value, "updated_at": now}
    if to_status in _TIMESTAMP_OF:
        columns[_TIMESTAMP_OF[to_status]] = now
    if to_status in (Status.REJECTED, Status.FAILED):
        columns["reason"] = detail
    elif to_status in (Status.FINISHED, Status.QUEUED):
        columns["reason"] = None
    if to_status != Status.SCORING:
        columns["lease_owner"] = None
        columns["lease_expires_at"] = None
    own_columns, figures = split_figures(values or {})
    columns.update(own_columns)
    statement = update(Submission).where(
        Submission.id == submission_id, Submission.status.in_([s.value for s in expected])
    )
    if lease_owner is not None:
        statement = statement.where(Submission.lease_owner == lease_owner)
    result = session.execute(
        statement.values(**columns).execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:
        return False
    write_figures(session, submission_id=submission_id, values=figures)
    previous = expected[0].value if len(expected) == 1 else None
    session.add(
        SubmissionEvent(
            submission_id=submission_id,
            from_status=previous,
            to_status=to_status.value,
            at=now,
            detail=detail,
            worker=worker,
        )
    )
    board_changed(session, submission_id=submission_id)
    return True


def request_rescore(
    session: Session, *, submission_id: str, current_status: str, requested_by: str
) -> bool:
    """Put a finished, rejected or failed submission back in the queue, attempts reset.

    Returns:
        False when the submission is still in progress or moved meanwhile; the caller
        commits and enqueues on True.
    """
    if current_status not in TERMINAL:
        return False
    return transition(
        session,
        submission_id=submission_id,
        from_status=Status(current_status),
        to_status=Status.QUEUED,
        detail=f"re-score requested by {requested_by}",
        values={"attempts": 0},
    )


def get_submission(session: Session, *, submission_id: str) -> Submission | None:
    """A submission with its team, events and track figures loaded, or None."""
    return session.scalar(
        select(Submission)
        .options(joinedload(Submission.team), selectinload(Submission.events),
                 selectinload(Submission.figure_rows))  # fmt: skip
        .where(Submission.id == submission_id)
    )


def list_submissions(
    session: Session, *, team_id: int | None, limit: int = 100, offset: int = 0
) -> list[Submission]:
    """Submissions of one team (or all, for ``team_id=None``), newest first."""
    statement = select(Submission).options(
        selectinload(Submission.team), selectinload(Submission.events),
        selectinload(Submission.figure_rows),
    )  # fmt: skip
    if team_id is not None:
        statement = statement.where(Submission.team_id == team_id)
    statement = statement.order_by(Submission.created_at.desc()).limit(limit).offset(offset)
    return list(session.scalars(statement))
