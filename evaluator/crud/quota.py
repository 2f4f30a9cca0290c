"""The daily submission quota: the submissions that count against a team's quota per UTC day."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from evaluator.tables import NOT_COUNTED_IN_QUOTA, Submission


class QuotaExceeded(Exception):
    """The team has used its submissions for the current UTC day."""


def day_start(now: dt.datetime) -> dt.datetime:
    """Midnight UTC of the day of ``now``: the quota window."""
    return now.astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def used_quota(session: Session, *, team_id: int, now: dt.datetime) -> int:
    """Submissions of a team today that count against its quota."""
    return (
        session.scalar(
            select(func.count(Submission.id)).where(
                Submission.team_id == team_id,
                Submission.created_at >= day_start(now),
                Submission.status.not_in(NOT_COUNTED_IN_QUOTA),
            )
        )
        or 0
    )
