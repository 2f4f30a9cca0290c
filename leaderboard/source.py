"""Read the evaluator's database into ranking rows (the only module of the package that queries).

The leaderboard never writes results: it reads the ``submissions`` and ``teams`` tables through
the evaluator's own models and engine, and the organiser actions go through ``evaluator.crud``.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from evaluator import crud
from evaluator.models import Submission, Team
from leaderboard.ranking import Row

_COLUMNS = (
    Submission.id,
    Team.name,
    Submission.track,
    Submission.method,
    Submission.status,
    Submission.created_at,
    Submission.reason,
    Submission.anls,
    Submission.anls_in,
    Submission.anls_out,
    Submission.accuracy,
    Submission.total_bytes,
    Submission.epsilon,
    Submission.delta,
    Submission.privacy_verified,
    Submission.personal_anls,
    Submission.personal_anls_std,
    Submission.personal_worst_anls,
    Submission.global_unseen_anls,
    Submission.personal_clients,
    Submission.hidden,
    Submission.disqualified_reason,
)


def load_rows(session: Session, *, track: int | None = None) -> list[Row]:
    """Every submission (of one track, when given) as a ranking row, oldest first.

    Args:
        session: an open session on the evaluator's database.
        track: a track number to read only that track.

    Returns:
        The rows.
    """
    statement = select(*_COLUMNS).join(Team, Team.id == Submission.team_id)
    if track is not None:
        statement = statement.where(Submission.track == track)
    statement = statement.order_by(Submission.created_at, Submission.id)
    return [
        Row(
            id=r[0],
            team=r[1],
            track=r[2],
            method=r[3],
            status=r[4],
            created_at=r[5],
            reason=r[6],
            anls=r[7],
            anls_in=r[8],
            anls_out=r[9],
            accuracy=r[10],
            total_bytes=r[11],
            epsilon=r[12],
            delta=r[13],
            privacy_verified=r[14],
            personal_anls=r[15],
            personal_anls_std=r[16],
            personal_worst_anls=r[17],
            global_unseen_anls=r[18],
            personal_clients=tuple(r[19]) if r[19] else None,
            hidden=bool(r[20]),
            disqualified_reason=r[21],
        )
        for r in session.execute(statement)
    ]


def load_submission(session: Session, *, submission_id: str) -> Submission | None:
    """One submission with its team and events (for the detail page), or None."""
    return crud.get_submission(session, submission_id=submission_id)
