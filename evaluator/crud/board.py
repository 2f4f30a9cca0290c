"""The leaderboard's version: advanced by every submission change, read before the rows it keys."""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from evaluator.tables import BoardVersion, Submission


def board_changed(session: Session, *, submission_id: str | None) -> None:
    """Advance the leaderboard's version in the caller's transaction (every submission change)
    and mark the changed submission with the new version.

    The pages cached for the old version are stale once the transaction commits; the marker
    lets the leaderboard re-read only the submissions changed since the version it last read.
    Called last in a transaction's writes, so its row lock is held only until the commit. That
    lock also serialises the changes: once version V is visible, so is every change marked V
    or lower.

    Args:
        session: open session (committed by the caller).
        submission_id: the changed submission, or None for a change no marker can show (a
            deleted submission): readers then read every submission again.
    """
    statement = update(BoardVersion).where(BoardVersion.id == 1)
    if submission_id is None:
        statement = statement.values(
            version=BoardVersion.version + 1, unmarked_version=BoardVersion.version + 1
        )
    else:
        statement = statement.values(version=BoardVersion.version + 1)
    version = session.execute(statement.returning(BoardVersion.version)).scalar_one_or_none()
    if submission_id is not None and version is not None:
        session.execute(
            update(Submission)
            .where(Submission.id == submission_id)
            .values(board_version=version)
            .execution_options(synchronize_session=False)
        )


def board_version(session: Session) -> int:
    """The leaderboard's current version (read it before the rows it keys)."""
    return int(session.scalar(select(BoardVersion.version).where(BoardVersion.id == 1)) or 0)


def board_state(session: Session) -> tuple[int, int]:
    """The leaderboard's current version and the version of its last unmarked change (see
    :func:`board_changed`), in one read."""
    row = session.execute(
        select(BoardVersion.version, BoardVersion.unmarked_version).where(BoardVersion.id == 1)
    ).first()
    return (0, 0) if row is None else (int(row[0]), int(row[1]))
