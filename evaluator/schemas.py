"""The API's request and answer bodies (pydantic): a submission as its team or the organisers
see it, teams, and the health and readiness answers."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator

from benchmark.result_figures import PYTHON_TYPES, SHARED_FIGURES, Figure
from benchmark.tracks import track_figures
from evaluator import team_names
from evaluator.tables import Status, Submission

# Per-round tallies in one API answer (the log may hold up to max_log_rounds rounds).
MAX_ROUNDS_SHOWN = 1000


class TransitionPublic(BaseModel):
    """A state transition as the API shows it."""

    model_config = ConfigDict(from_attributes=True)

    from_status: str | None
    to_status: str
    at: dt.datetime
    detail: str | None


class _Results(BaseModel):
    """Scores, communication tally and privacy verification of a finished submission: every
    shared figure (``benchmark.result_figures.SHARED_FIGURES``), every track's own
    (``benchmark.tracks.Track.figures``) and the reproduction's verdict.

    The fields are the declarations' (:func:`_figure_field`); a track registered after this
    module was imported shows its figures as further keys.
    """

    model_config = ConfigDict(extra="allow")

    reproduction: str | None = Field(
        default=None,
        description="the organisers' re-run of the recipe: null (not selected), queued, "
        "reproducing, or the verdict (reproduced exactly, reproduced within tolerance, not "
        "reproduced, failed)",
    )
    reproduction_reason: str | None = Field(
        default=None, description="the verdict's sentence: where a re-run differed or why it failed"
    )


def _figure_field(figure: Figure) -> tuple[Any, Any]:
    """A figure as a pydantic field: its kind's type or None, described as declared."""
    kind = PYTHON_TYPES[figure.kind]
    return (kind if kind is Any else kind | None,
            Field(default=None, description=figure.description or None))  # fmt: skip


ResultsPublic: type[_Results] = create_model(
    "ResultsPublic",
    __base__=_Results,
    __doc__=_Results.__doc__,
    **{f.name: _figure_field(f) for f in (*SHARED_FIGURES, *track_figures().values())},
)  # fmt: skip

# The submission columns the API view is built from (``SubmissionPublic.from_values``).
PUBLIC_COLUMNS = (
    "id", "track", "method", "family", "description", "status", "reason", "attempts", "created_at",
    "updated_at", "queued_at", "scoring_started_at", "finished_at",
    *(f.name for f in SHARED_FIGURES), *_Results.model_fields,
)  # fmt: skip


def _results(values: Mapping[str, Any], figures: Mapping[str, Any],
             full_precision: bool) -> _Results:  # fmt: skip
    """The results of a view: the shared figures and the reproduction from ``values``, every
    track's figures from ``figures`` (None when absent), rounded as declared unless
    ``full_precision``."""
    declared = [*SHARED_FIGURES, *track_figures().values()]
    merged = {**values, **figures}
    results = {name: values[name] for name in _Results.model_fields}
    for figure in declared:
        value = merged.get(figure.name)
        results[figure.name] = value if full_precision else figure.published(value)
    if results["per_round"] is not None:
        results["per_round"] = results["per_round"][:MAX_ROUNDS_SHOWN]
    return ResultsPublic(**results)


class SubmissionPublic(BaseModel):
    """A submission as its team (or an organiser) sees it."""

    id: str
    team: str
    track: int
    method: str
    family: str = Field(default="vt5", description="the checkpoint's model family")
    description: str
    status: Status
    reason: str | None
    attempts: int
    created_at: dt.datetime
    updated_at: dt.datetime
    queued_at: dt.datetime | None
    scoring_started_at: dt.datetime | None
    finished_at: dt.datetime | None
    anls: float | None = Field(description="test ANLS (same as results.anls)")
    accuracy: float | None
    total_bytes: int | None = Field(description="bytes exchanged, both directions")
    results: ResultsPublic
    transitions: list[TransitionPublic]
    waiting_for_worker_since: dt.datetime | None = Field(
        default=None,
        description="a queued submission while no scoring worker is live: since when it waits",
    )
    waiting: str | None = Field(
        default=None, description="a queued submission while no scoring worker is live: why"
    )

    @classmethod
    def from_row(cls, row: Submission, *, full_precision: bool = False) -> SubmissionPublic:
        """Build the API view of a submission row (team and events loaded).

        Args:
            row: the submission.
            full_precision: organisers only; participants get each figure rounded as declared
                (``Figure.decimals``: more would let repeated submissions probe single hidden
                answers).

        Returns:
            The view, with at most ``MAX_ROUNDS_SHOWN`` per-round tallies.
        """
        values = {name: getattr(row, name) for name in PUBLIC_COLUMNS}
        events = [(e.from_status, e.to_status, e.at, e.detail) for e in row.events]
        return cls.from_values(values, team=row.team.name, events=events,
                               full_precision=full_precision, figures=row.figures)  # fmt: skip

    @classmethod
    def from_values(
        cls,
        values: Mapping[str, Any],
        *,
        team: str,
        events: Sequence[tuple[str | None, str, dt.datetime, str | None]],
        full_precision: bool = False,
        figures: Mapping[str, Any] | None = None,
    ) -> SubmissionPublic:
        """Build the API view from a submission's column values (``PUBLIC_COLUMNS``).

        Args:
            values: the submission's columns by name.
            team: its team's name.
            events: its transitions, oldest first, as (from, to, at, detail).
            full_precision: see :meth:`from_row`.
            figures: its track figures by name (``crud.figures_of``); those left out are None.

        Returns:
            The view.
        """
        results = _results(values, figures or {}, full_precision)
        return cls(
            id=values["id"],
            team=team,
            track=values["track"],
            method=values["method"],
            family=values["family"],
            description=values["description"],
            status=Status(values["status"]),
            reason=values["reason"],
            attempts=values["attempts"],
            created_at=values["created_at"],
            updated_at=values["updated_at"],
            queued_at=values["queued_at"],
            scoring_started_at=values["scoring_started_at"],
            finished_at=values["finished_at"],
            anls=results.anls,
            accuracy=results.accuracy,
            total_bytes=values["total_bytes"],
            results=results,
            transitions=[
                TransitionPublic(from_status=f, to_status=t, at=at, detail=d)
                for f, t, at, d in events
            ],
        )


class SubmissionAccepted(BaseModel):
    """Answer to an accepted upload (HTTP 202)."""

    id: str
    status: Status
    url: str


class SubmissionList(BaseModel):
    """A team's submissions, newest first."""

    submissions: list[SubmissionPublic]


class TeamCreate(BaseModel):
    """Request body of the organiser endpoint that creates a team."""

    name: str = Field(min_length=1, max_length=100, description="see evaluator.team_names")
    organiser: bool = False

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        return team_names.normalise(value)


class TeamCreated(BaseModel):
    """A new team and its API token (shown once, stored only as a hash)."""

    id: int
    name: str
    organiser: bool
    token: str


class ReadyState(BaseModel):
    """Answer of ``GET /readyz``: whether the service can score what it accepts."""

    status: Literal["ready", "not ready"]
    database: Literal["ok", "behind its migrations"]
    live_workers: int
    starting_workers: int
    reasons: list[str]


class Health(BaseModel):
    """Answer of ``GET /healthz``."""

    status: Literal["ok"]
    database: Literal["ok"]
