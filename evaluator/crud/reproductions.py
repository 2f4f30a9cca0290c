"""The re-runs' queue in the submissions table: selected, claimed by one worker, recorded.

A re-run is long (a whole training) and comes after scoring, so it does not travel on the
scoring queue: the worker's reproducer thread claims the oldest ``queued`` row when it is idle
(:mod:`evaluator.worker.reproducer`). Every change advances the board's version, since the
leaderboard shows the state and ranks on the verdict.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, NamedTuple

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from evaluator.crud.board import board_changed
from evaluator.tables import Submission, utcnow

QUEUED = "queued"
REPRODUCING = "reproducing"


def queue_reproduction(session: Session, *, submission_id: str) -> bool:
    """Select a finished submission for a re-run (once); whether it was queued now."""
    done = session.execute(
        update(Submission)
        .where(Submission.id == submission_id, Submission.reproduction.is_(None))
        .values(reproduction=QUEUED)
        .execution_options(synchronize_session=False)
    ).rowcount
    if done:
        board_changed(session, submission_id=submission_id)
    return bool(done)


class ClaimedRerun(NamedTuple):
    """A re-run a worker now holds: the submission, its track and its model family."""

    id: str
    track: int
    family: str


def claim_reproduction(session: Session, *, worker: str) -> ClaimedRerun | None:
    """The oldest queued re-run, now held by ``worker``; None when there is none (or another
    worker took it first)."""
    found = session.execute(
        select(Submission.id, Submission.track, Submission.family)
        .where(Submission.reproduction == QUEUED)
        .order_by(Submission.finished_at, Submission.id)
        .limit(1)
    ).first()
    if found is None:
        return None
    candidate = found.id
    claimed = session.execute(
        update(Submission)
        .where(Submission.id == candidate, Submission.reproduction == QUEUED)
        .values(reproduction=REPRODUCING, reproduction_owner=worker,
                reproduction_started_at=utcnow())  # fmt: skip
        .execution_options(synchronize_session=False)
    ).rowcount
    if not claimed:
        return None
    board_changed(session, submission_id=candidate)
    return ClaimedRerun(candidate, found.track, found.family)


def record_reproduction(session: Session, *, submission_id: str, worker: str, outcome: str,
                        reason: str, report: dict[str, Any]) -> bool:  # fmt: skip
    """Store a re-run's verdict if ``worker`` still holds it."""
    done = session.execute(
        update(Submission)
        .where(Submission.id == submission_id, Submission.reproduction == REPRODUCING,
               Submission.reproduction_owner == worker)  # fmt: skip
        .values(reproduction=outcome, reproduction_reason=reason, reproduction_report=report,
                reproduction_owner=None)  # fmt: skip
        .execution_options(synchronize_session=False)
    ).rowcount
    if done:
        board_changed(session, submission_id=submission_id)
    return bool(done)


def requeue_abandoned_reproductions(session: Session, *, older_than: dt.timedelta) -> int:
    """Queue again the re-runs held longer than ``older_than`` (their worker died)."""
    stale = list(session.scalars(
        select(Submission.id).where(Submission.reproduction == REPRODUCING,
                                    Submission.reproduction_started_at < utcnow() - older_than)
    ))  # fmt: skip
    for submission_id in stale:
        session.execute(
            update(Submission).where(Submission.id == submission_id)
            .values(reproduction=QUEUED, reproduction_owner=None)
            .execution_options(synchronize_session=False)
        )  # fmt: skip
        board_changed(session, submission_id=submission_id)
    return len(stale)
