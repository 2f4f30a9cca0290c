"""Read the evaluator's database into ranking rows (the only module of the package that queries).

The leaderboard never writes results: it reads the ``submissions`` and ``teams`` tables through
the evaluator's own models and engine, and the organiser actions go through ``evaluator.crud``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select, bindparam, select
from sqlalchemy.orm import Session

from evaluator import crud
from evaluator.tables import Submission, Team
from leaderboard.ranking import Row

_NAMES = (
    "id", "team", "track", "method", "status", "created_at", "reason", "anls", "anls_in",
    "anls_out", "accuracy", "total_bytes", "official_logger_total_bytes", "epsilon", "delta",
    "privacy_verified",
    "personal_anls", "personal_anls_std", "personal_worst_anls", "global_unseen_anls",
    "personal_clients", "audit_epsilon", "audit_contradicted", "hidden", "disqualified_reason",
    "reproduction", "reproduction_reason",
)  # fmt: skip


def _rows_statement() -> Select[Any]:
    """Every submission's ranking columns with its team's name, oldest first (SQLAlchemy Core
    on the ORM's tables, built once: it skips the ORM's per-row loading and recompiling)."""
    submissions, teams = Submission.__table__, Team.__table__
    columns = [teams.c.name if name == "team" else submissions.c[name] for name in _NAMES]
    return (
        select(*columns)
        .join_from(submissions, teams, teams.c.id == submissions.c.team_id)
        .order_by(submissions.c.created_at, submissions.c.id)
    )


_CLIENTS, _HIDDEN = _NAMES.index("personal_clients"), _NAMES.index("hidden")
_ROWS = _rows_statement()
_ROWS_OF_TRACK = _ROWS.where(Submission.__table__.c.track == bindparam("track"))
_ROWS_CHANGED = _ROWS.where(Submission.__table__.c.board_version > bindparam("since"))


def load_rows(session: Session, *, track: int | None = None) -> list[Row]:
    """Every submission (of one track, when given) as a ranking row, oldest first.

    Args:
        session: an open session on the evaluator's database.
        track: a track number to read only that track.

    Returns:
        The rows.
    """
    if track is None:
        result = session.execute(_ROWS)
    else:
        result = session.execute(_ROWS_OF_TRACK, {"track": track})
    return [_row(v) for v in result.tuples()]


def load_changed_rows(session: Session, *, since: int) -> list[Row]:
    """The submissions changed after board version ``since`` (their ``board_version`` marker,
    indexed), as ranking rows, oldest first.

    Args:
        session: an open session on the evaluator's database.
        since: a board version.

    Returns:
        The rows.
    """
    return [_row(v) for v in session.execute(_ROWS_CHANGED, {"since": since}).tuples()]


def _row(values: tuple[Any, ...]) -> Row:
    """A ``Row`` of one result tuple.

    Filled through its ``__dict__`` rather than the frozen dataclass's ``__init__`` (which sets
    each field through ``object.__setattr__``): a rebuild creates 10,000 of them, and this is
    about three times faster. ``_NAMES`` is the order of ``Row``'s fields (a test checks it).
    """
    row = object.__new__(Row)
    row.__dict__.update(zip(_NAMES, values, strict=True))
    clients = values[_CLIENTS]
    row.__dict__["personal_clients"] = tuple(clients) if clients else None
    row.__dict__["hidden"] = bool(values[_HIDDEN])
    return row


def load_submission(session: Session, *, submission_id: str) -> Submission | None:
    """One submission with its team and events (for the detail page), or None."""
    return crud.get_submission(session, submission_id=submission_id)
