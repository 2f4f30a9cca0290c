"""A submission's track figures (``benchmark.tracks.Track.figures``): written with the columns
of a transition, read by name for the API views and the leaderboard's rows.

They live in ``submission_figures``, one row per figure with a value; a figure set to None has
no row. The tracks' declarations say which names are figures (read when called, so a track
registered later counts).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import bindparam, delete, insert, select
from sqlalchemy.orm import Session

from benchmark.tracks import track_figures
from evaluator.tables import SubmissionFigure, figure_kinds, stored_value, typed_value

_FIGURES = SubmissionFigure.__table__
_OF_SUBMISSIONS = select(_FIGURES.c.submission_id, _FIGURES.c.figure, _FIGURES.c.number,
                         _FIGURES.c.document).where(
    _FIGURES.c.submission_id.in_(bindparam("ids", expanding=True)))  # fmt: skip


def split_figures(values: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``values`` split into the ``submissions`` columns and the track figures."""
    declared = track_figures()
    columns = {name: value for name, value in values.items() if name not in declared}
    figures = {name: value for name, value in values.items() if name in declared}
    return columns, figures


def write_figures(session: Session, *, submission_id: str, values: Mapping[str, Any]) -> None:
    """Set these track figures of a submission (others keep theirs); None removes a value.

    Args:
        session: open session (committed by the caller).
        submission_id: the submission.
        values: figure name -> value, every name a declared track figure.

    Raises:
        ValueError: a name no track declares, or a value its figure's kind cannot hold.
    """
    if not values:
        return
    declared = track_figures()
    unknown = sorted(set(values) - set(declared))
    if unknown:
        raise ValueError(f"{unknown} are not figures of any track (benchmark.tracks)")
    session.execute(delete(_FIGURES).where(_FIGURES.c.submission_id == submission_id,
                                           _FIGURES.c.figure.in_(list(values))))  # fmt: skip
    rows = []
    for name, value in values.items():
        if value is None:
            continue
        number, document = stored_value(declared[name], value)
        rows.append({"submission_id": submission_id, "figure": name, "number": number,
                     "document": document})  # fmt: skip
    if rows:
        session.execute(insert(_FIGURES), rows)


def figures_of(session: Session, *, submission_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The track figures these submissions have.

    Args:
        session: open session.
        submission_ids: the submissions.

    Returns:
        Submission id -> {figure name: value} (a submission without figures is left out).
    """
    ids = sorted(set(submission_ids))
    out: dict[str, dict[str, Any]] = {}
    if not ids:
        return out
    kinds = figure_kinds()
    for submission_id, name, number, document in session.execute(_OF_SUBMISSIONS, {"ids": ids}):
        out.setdefault(submission_id, {})[name] = typed_value(kinds.get(name), number, document)
    return out
