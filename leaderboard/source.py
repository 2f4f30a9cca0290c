"""Read the evaluator's database into ranking rows (the only module of the package that queries).

The leaderboard never writes results: it reads the ``submissions`` and ``teams`` tables through
the evaluator's own models and engine, and the organiser actions go through ``evaluator.crud``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select, bindparam, select
from sqlalchemy.orm import Session

from benchmark.result_figures import Shown
from benchmark.tracks import TRACKS
from evaluator import crud
from evaluator.tables import Submission, SubmissionFigure, Team, figure_kinds, typed_value
from leaderboard.ranking import Row

_NAMES = (
    "id", "team", "track", "method", "status", "created_at", "family", "reason", "anls", "anls_in",
    "anls_out", "accuracy", "total_bytes", "official_logger_total_bytes", "epsilon", "delta",
    "privacy_verified", "audit_epsilon", "audit_contradicted", "hidden", "disqualified_reason",
    "reproduction", "reproduction_reason", "figures",
)  # fmt: skip
"""``Row``'s fields in order: the columns the rows' query reads, then the track figures the
figures' query reads."""
_COLUMNS = _NAMES[:-1]


def _rows_statement() -> Select[Any]:
    """Every submission's ranking columns with its team's name, oldest first (SQLAlchemy Core
    on the ORM's tables, built once: it skips the ORM's per-row loading and recompiling)."""
    submissions, teams = Submission.__table__, Team.__table__
    columns = [teams.c.name if name == "team" else submissions.c[name] for name in _COLUMNS]
    return (
        select(*columns)
        .join_from(submissions, teams, teams.c.id == submissions.c.team_id)
        .order_by(submissions.c.created_at, submissions.c.id)
    )


def _figures_statement() -> Select[Any]:
    """The track figures of the submissions :func:`_rows_statement` reads, by name (expanding
    ``names``): joined to ``submissions`` so the same filters apply."""
    submissions, figures = Submission.__table__, SubmissionFigure.__table__
    return (
        select(figures.c.submission_id, figures.c.figure, figures.c.number, figures.c.document)
        .join_from(figures, submissions, submissions.c.id == figures.c.submission_id)
        .where(figures.c.figure.in_(bindparam("names", expanding=True)))
    )


_HIDDEN = _NAMES.index("hidden")
_ROWS = _rows_statement()
_ROWS_OF_TRACK = _ROWS.where(Submission.__table__.c.track == bindparam("track"))
_ROWS_CHANGED = _ROWS.where(Submission.__table__.c.board_version > bindparam("since"))
_FIGURES = _figures_statement()
_FIGURES_OF_TRACK = _FIGURES.where(Submission.__table__.c.track == bindparam("track"))
_FIGURES_CHANGED = _FIGURES.where(Submission.__table__.c.board_version > bindparam("since"))


def load_rows(session: Session, *, track: int | None = None) -> list[Row]:
    """Every submission (of one track, when given) as a ranking row, oldest first.

    Args:
        session: an open session on the evaluator's database.
        track: a track number to read only that track.

    Returns:
        The rows.
    """
    if track is None:
        return _read(session, _ROWS, _FIGURES, {})
    return _read(session, _ROWS_OF_TRACK, _FIGURES_OF_TRACK, {"track": track})


def load_changed_rows(session: Session, *, since: int) -> list[Row]:
    """The submissions changed after board version ``since`` (their ``board_version`` marker,
    indexed), as ranking rows, oldest first.

    Args:
        session: an open session on the evaluator's database.
        since: a board version.

    Returns:
        The rows.
    """
    return _read(session, _ROWS_CHANGED, _FIGURES_CHANGED, {"since": since})


def _read(session: Session, rows: Select[Any], figures: Select[Any],
          parameters: dict[str, Any]) -> list[Row]:  # fmt: skip
    """The rows of ``rows`` with the board figures ``figures`` reads for them.

    The figures are read first: a submission changed between the two reads has its new
    figures and, at worst, its older columns, which its change's board version re-reads.
    """
    names, kinds = board_figures(), figure_kinds()
    by_submission: dict[str, dict[str, Any]] = {}
    if names:
        read = session.execute(figures, {**parameters, "names": sorted(names)})
        for submission_id, name, number, document in read:
            value = typed_value(kinds.get(name), number, document)
            by_submission.setdefault(submission_id, {})[name] = (
                tuple(value) if isinstance(value, list) else value
            )
    return [_row(v, by_submission.get(v[0])) for v in session.execute(rows, parameters).tuples()]


def board_figures() -> set[str]:
    """The names of every track's own figures shown on the board (scalars for the tables and
    exports, documents for the plots)."""
    return {figure.name for track in TRACKS.values() for figure in track.figures
            if figure.shown is Shown.BOARD}  # fmt: skip


def _row(values: tuple[Any, ...], figures: dict[str, Any] | None) -> Row:
    """A ``Row`` of one result tuple and its figures.

    Filled through its ``__dict__`` rather than its ``__init__`` (which checks every name and
    sets each field through ``object.__setattr__``): a rebuild creates 10,000 of them, and this
    is about three times faster. ``_NAMES`` is the order of ``Row``'s fields (a test checks it).
    """
    row = object.__new__(Row)
    row.__dict__.update(zip(_COLUMNS, values, strict=True))
    row.__dict__["hidden"] = bool(values[_HIDDEN])
    row.__dict__["figures"] = figures or {}
    return row


def load_submission(session: Session, *, submission_id: str) -> Submission | None:
    """One submission with its team, events and figures (for the detail page), or None."""
    return crud.get_submission(session, submission_id=submission_id)
