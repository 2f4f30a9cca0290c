"""The API's request and answer bodies (pydantic): a submission as its team or the organisers
see it, teams, and the health and readiness answers."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from evaluator import team_names
from evaluator.tables import Status, Submission

# Scores participants see: 4 decimals, as the competition published them.
PUBLIC_DECIMALS = 4
SCORE_FIELDS = ("anls", "accuracy", "anls_in", "anls_out", "accuracy_in", "accuracy_out",
                "personal_anls", "personal_anls_std", "personal_worst_anls",
                "global_personal_anls", "global_unseen_anls")  # fmt: skip
#: the scores of each per-client entry of ``personal_clients``.
CLIENT_SCORE_FIELDS = ("personal_anls", "global_anls")
# Per-round tallies in one API answer (the log may hold up to max_log_rounds rounds).
MAX_ROUNDS_SHOWN = 1000


class TransitionPublic(BaseModel):
    """A state transition as the API shows it."""

    model_config = ConfigDict(from_attributes=True)

    from_status: str | None
    to_status: str
    at: dt.datetime
    detail: str | None


class ResultsPublic(BaseModel):
    """Scores, communication tally and privacy verification of a finished submission."""

    anls: float | None = None
    accuracy: float | None = None
    anls_in: float | None = None
    anls_out: float | None = None
    accuracy_in: float | None = None
    accuracy_out: float | None = None
    n_questions: int | None = None
    n_in: int | None = None
    n_out: int | None = None
    total_bytes: int | None = None
    official_logger_total_bytes: int | None = Field(
        default=None,
        description="what the official starter kit's logger would have counted "
        "(as the published tables did), declared in submission.json: not checked, not ranked",
    )
    bytes_up: int | None = None
    bytes_down: int | None = None
    rounds: int | None = None
    messages: int | None = None
    per_round: list[dict[str, int]] | None = Field(
        default=None, description="per-round tallies, the first 1000 rounds at most"
    )
    epsilon: float | None = None
    delta: float | None = None
    privacy_verified: bool | None = None
    privacy_report: dict[str, Any] | None = None
    personal_anls: float | None = Field(
        default=None, description="track 3: mean personalised ANLS, weighted by questions"
    )
    personal_anls_std: float | None = None
    personal_worst_client: int | None = None
    personal_worst_anls: float | None = None
    global_personal_anls: float | None = None
    global_unseen_anls: float | None = None
    n_personal: int | None = None
    personal_clients: list[dict[str, Any]] | None = Field(
        default=None, description="track 3: per client n, personal_anls, global_anls"
    )
    personal_report: dict[str, Any] | None = None
    audit_epsilon: float | None = Field(
        default=None, description="privacy audit: empirical epsilon lower bound (95% confidence)"
    )
    audit_auc: float | None = None
    audit_tpr: float | None = Field(default=None, description="privacy audit: TPR at audit_fpr")
    audit_fpr: float | None = None
    audit_seconds: float | None = None
    audit_contradicted: bool | None = Field(
        default=None, description="the privacy claim's epsilon is below the audit's lower bound"
    )
    audit_report: dict[str, Any] | None = None
    scoring_seconds: float | None = None
    reproduction: str | None = Field(
        default=None,
        description="the organisers' re-run of the recipe: null (not selected), queued, "
        "reproducing, or the verdict (reproduced exactly, reproduced within tolerance, not "
        "reproduced, failed)",
    )
    reproduction_reason: str | None = Field(
        default=None, description="the verdict's sentence: where a re-run differed or why it failed"
    )


# The submission columns the API view is built from (``SubmissionPublic.from_values``).
PUBLIC_COLUMNS = (
    "id", "track", "method", "description", "status", "reason", "attempts", "created_at",
    "updated_at", "queued_at", "scoring_started_at", "finished_at", *ResultsPublic.model_fields,
)  # fmt: skip


class SubmissionPublic(BaseModel):
    """A submission as its team (or an organiser) sees it."""

    id: str
    team: str
    track: int
    method: str
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
            full_precision: organisers only; participants get scores to ``PUBLIC_DECIMALS``
                decimals (more would let repeated submissions probe single hidden answers).

        Returns:
            The view, with at most ``MAX_ROUNDS_SHOWN`` per-round tallies.
        """
        values = {name: getattr(row, name) for name in PUBLIC_COLUMNS}
        events = [(e.from_status, e.to_status, e.at, e.detail) for e in row.events]
        return cls.from_values(
            values, team=row.team.name, events=events, full_precision=full_precision
        )

    @classmethod
    def from_values(
        cls,
        values: Mapping[str, Any],
        *,
        team: str,
        events: Sequence[tuple[str | None, str, dt.datetime, str | None]],
        full_precision: bool = False,
    ) -> SubmissionPublic:
        """Build the API view from a submission's column values (``PUBLIC_COLUMNS``).

        Args:
            values: the submission's columns by name.
            team: its team's name.
            events: its transitions, oldest first, as (from, to, at, detail).
            full_precision: see :meth:`from_row`.

        Returns:
            The view.
        """
        results_values = {name: values[name] for name in ResultsPublic.model_fields}
        if not full_precision:
            for name in SCORE_FIELDS:
                if results_values[name] is not None:
                    results_values[name] = round(results_values[name], PUBLIC_DECIMALS)
        if results_values["per_round"] is not None:
            results_values["per_round"] = results_values["per_round"][:MAX_ROUNDS_SHOWN]
        if results_values["personal_clients"] is not None and not full_precision:
            results_values["personal_clients"] = [
                {k: round(v, PUBLIC_DECIMALS) if k in CLIENT_SCORE_FIELDS and v is not None
                 else v for k, v in entry.items()}
                for entry in results_values["personal_clients"]
            ]  # fmt: skip
        results = ResultsPublic(**results_values)
        return cls(
            id=values["id"],
            team=team,
            track=values["track"],
            method=values["method"],
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
