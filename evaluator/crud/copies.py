"""Copies: one checkpoint may be entered once per track (the upload's copy check)."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from evaluator.tables import NOT_COUNTED_IN_QUOTA, Status, Submission


def lock_checkpoint(session: Session, *, model_sha256: str) -> None:
    """Serialise the copy checks of one checkpoint until the caller's transaction ends.

    Two teams uploading the same checkpoint at the same instant lock different team rows, so
    on PostgreSQL both copy checks could run before either row is committed, and both pass. A
    transaction-level advisory lock keyed by the hash makes the second check wait for the
    first upload's commit (and then see it). SQLite needs none: the transaction's first write
    (``lock_team``) takes the database's write lock, which serialises every upload already.
    Take it before ``lock_team`` (one lock order everywhere: checkpoint, team, board version).
    """
    if session.get_bind().dialect.name == "postgresql":
        session.execute(select(func.pg_advisory_xact_lock(int(model_sha256[:15], 16))))


def find_copy(
    session: Session, *, model_sha256: str, track: int, exclude_id: str
) -> Submission | None:
    """The earliest live submission of a track whose checkpoint has this tensor digest.

    Rejected and failed submissions, and uploads still arriving, do not count. The tracks are
    separate competitions: one checkpoint may be entered once in each.

    Args:
        session: open session.
        model_sha256: hex digest of the uploaded checkpoint's tensors (with its
            personalisations for track 3,
            ``evaluator.validation.tensor_digest.submission_fingerprint``).
        track: a `benchmark.tracks` number.
        exclude_id: the submission being checked.

    Returns:
        The original, or None.
    """
    return session.scalar(
        select(Submission)
        .where(
            Submission.model_sha256 == model_sha256,
            Submission.track == track,
            Submission.id != exclude_id,
            Submission.status.not_in([*NOT_COUNTED_IN_QUOTA, Status.RECEIVED.value]),
        )
        .order_by(Submission.created_at, Submission.id)
        .limit(1)
    )
