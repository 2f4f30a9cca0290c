"""The organisers' flags on a submission: hidden, disqualified (with the reason)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session

from evaluator.crud.board import board_changed
from evaluator.tables import Submission, SubmissionEvent, utcnow


def set_flags(
    session: Session,
    *,
    submission_id: str,
    organiser: str,
    action: str,
    reason: str = "",
) -> bool:
    """Hide, unhide, disqualify or requalify a submission, recording an event naming who.

    Args:
        session: open session (committed by the caller).
        submission_id: the submission.
        organiser: name of the acting organiser.
        action: ``hide``, ``unhide``, ``disqualify`` or ``requalify``.
        reason: why (kept as the disqualification reason).

    Returns:
        False when the submission does not exist.

    Raises:
        ValueError: an unknown action.
    """
    values: dict[str, Any] = {
        "hide": {"hidden": True},
        "unhide": {"hidden": False},
        "disqualify": {"disqualified_reason": reason[:2000]},
        "requalify": {"disqualified_reason": None},
    }[action]
    row = session.get(Submission, submission_id)
    if row is None:
        return False
    now = utcnow()
    session.execute(
        update(Submission)
        .where(Submission.id == submission_id)
        .values(updated_at=now, **values)
        .execution_options(synchronize_session=False)
    )
    session.add(
        SubmissionEvent(
            submission_id=submission_id,
            from_status=row.status,
            to_status=row.status,
            at=now,
            detail=f"{action} by {organiser}" + (f": {reason}" if reason else ""),
        )
    )
    board_changed(session, submission_id=submission_id)
    return True
