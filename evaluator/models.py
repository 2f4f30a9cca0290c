"""Database tables and the API's public schemas (one block per entity).

Tables: ``teams`` (hashed API tokens, organiser role), ``submissions`` (one row per upload with
its state, timestamps, lease and every result the leaderboard ranks on) and
``submission_events`` (each state transition, timestamped) and ``workers`` (each scoring
worker's heartbeat and, for one that refused to start, why).
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    TypeDecorator,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from benchmark.tracks import TRACKS, track_numbers
from evaluator import team_names


def utcnow() -> dt.datetime:
    """The current time, timezone-aware UTC."""
    return dt.datetime.now(dt.UTC)


class UTCDateTime(TypeDecorator[dt.datetime]):
    """A timestamp stored as UTC and always read back timezone-aware (SQLite drops the zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: Any) -> dt.datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are not stored; use evaluator.models.utcnow()")
        value = value.astimezone(dt.UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: dt.datetime | None, dialect: Any) -> dt.datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


class Status(enum.StrEnum):
    """States of a submission: received -> queued -> scoring -> finished | rejected | failed."""

    RECEIVED = "received"
    QUEUED = "queued"
    SCORING = "scoring"
    FINISHED = "finished"
    REJECTED = "rejected"
    FAILED = "failed"


NOT_COUNTED_IN_QUOTA = (Status.REJECTED.value, Status.FAILED.value)
TERMINAL = (Status.FINISHED.value, Status.REJECTED.value, Status.FAILED.value)


class Base(DeclarativeBase):
    """Declarative base of the evaluator's tables."""


class Team(Base):
    """A participating team (or the organisers) and the hash of its API token."""

    __tablename__ = "teams"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    # The confusable skeleton of the name (evaluator.team_names.key): unique, so that names a
    # reader could mistake for one another cannot both be registered.
    name_key: Mapped[str] = mapped_column(String(100), unique=True, index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True, index=True)
    is_organiser: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    # Bumped by every upload: updating this row first serialises one team's quota checks.
    upload_seq: Mapped[int] = mapped_column(Integer, default=0)

    submissions: Mapped[list[Submission]] = relationship(back_populates="team")


class Submission(Base):
    """One uploaded run: its files, state, lease and results."""

    __tablename__ = "submissions"
    __table_args__ = (
        Index("ix_submissions_team_created", "team_id", "created_at"),
        Index("ix_submissions_status_lease", "status", "lease_expires_at"),
        Index("ix_submissions_track_status", "track", "status"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"))
    track: Mapped[int] = mapped_column(Integer)
    method: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(Text, default="")
    submission_metadata: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)

    status: Mapped[str] = mapped_column(String(16), default=Status.RECEIVED.value, index=True)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    queued_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)
    scoring_started_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)
    finished_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)

    attempts: Mapped[int] = mapped_column(Integer, default=0)
    lease_owner: Mapped[str | None] = mapped_column(String(64), nullable=True)
    lease_expires_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)

    model_bytes: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    model_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)
    # The earlier submission (of another team) whose checkpoint this one repeats, when the copy
    # policy is "flag".
    copy_of: Mapped[str | None] = mapped_column(String(36), nullable=True)
    has_privacy: Mapped[bool] = mapped_column(Boolean, default=False)

    anls: Mapped[float | None] = mapped_column(Float, nullable=True)
    accuracy: Mapped[float | None] = mapped_column(Float, nullable=True)
    anls_in: Mapped[float | None] = mapped_column(Float, nullable=True)
    anls_out: Mapped[float | None] = mapped_column(Float, nullable=True)
    accuracy_in: Mapped[float | None] = mapped_column(Float, nullable=True)
    accuracy_out: Mapped[float | None] = mapped_column(Float, nullable=True)
    n_questions: Mapped[int | None] = mapped_column(Integer, nullable=True)
    n_in: Mapped[int | None] = mapped_column(Integer, nullable=True)
    n_out: Mapped[int | None] = mapped_column(Integer, nullable=True)
    scoring_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)

    total_bytes: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # What the official starter kit's logger would have counted (declared in submission.json,
    # not checked, never ranked): the figure of the competition's published tables.
    official_logger_total_bytes: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    bytes_up: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    bytes_down: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    rounds: Mapped[int | None] = mapped_column(Integer, nullable=True)
    messages: Mapped[int | None] = mapped_column(Integer, nullable=True)
    per_round: Mapped[list[dict[str, int]] | None] = mapped_column(JSON, nullable=True)

    epsilon: Mapped[float | None] = mapped_column(Float, nullable=True)
    delta: Mapped[float | None] = mapped_column(Float, nullable=True)
    privacy_verified: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    privacy_report: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)

    # Track 3: mean personalised ANLS (weighted by questions), its spread across clients, the
    # global model's ANLS on the personal and the unseen-provider questions, per-client figures
    # ([{client, n, personal_anls, global_anls, personalised}]) and the organisers' report
    # (files, bytes, tensors replaced under a declared-frozen prefix).
    personal_anls: Mapped[float | None] = mapped_column(Float, nullable=True)
    personal_anls_std: Mapped[float | None] = mapped_column(Float, nullable=True)
    personal_worst_client: Mapped[int | None] = mapped_column(Integer, nullable=True)
    personal_worst_anls: Mapped[float | None] = mapped_column(Float, nullable=True)
    global_personal_anls: Mapped[float | None] = mapped_column(Float, nullable=True)
    global_unseen_anls: Mapped[float | None] = mapped_column(Float, nullable=True)
    n_personal: Mapped[int | None] = mapped_column(Integer, nullable=True)
    personal_clients: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, nullable=True)
    personal_report: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)

    # The one-run privacy audit with the benchmark's canary providers (every track): the
    # epsilon lower bound at 95% confidence, the attack's AUC and TPR at a low FPR, its cost,
    # whether a privacy claim is below the bound, and the report (or why it was skipped).
    audit_epsilon: Mapped[float | None] = mapped_column(Float, nullable=True)
    audit_auc: Mapped[float | None] = mapped_column(Float, nullable=True)
    audit_tpr: Mapped[float | None] = mapped_column(Float, nullable=True)
    audit_fpr: Mapped[float | None] = mapped_column(Float, nullable=True)
    audit_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    audit_contradicted: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    audit_report: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)

    # Verification by reproduction (``evaluator.reproduction``): null when the policy did not
    # select the submission, then ``queued``, ``reproducing`` and the verdict's outcome; the
    # verdict's sentence and figures (never the recipe), the worker holding the re-run and since
    # when.
    reproduction: Mapped[str | None] = mapped_column(String(32), nullable=True, index=True)
    reproduction_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    reproduction_report: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    reproduction_owner: Mapped[str | None] = mapped_column(String(64), nullable=True)
    reproduction_started_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)

    hidden: Mapped[bool] = mapped_column(Boolean, default=False)
    disqualified_reason: Mapped[str | None] = mapped_column(Text, nullable=True)

    # The board version of the row's latest change (``crud.board_changed``, same transaction):
    # the leaderboard re-reads only the rows changed since the version it last read.
    board_version: Mapped[int] = mapped_column(
        BigInteger, default=0, server_default="0", index=True
    )

    team: Mapped[Team] = relationship(back_populates="submissions")
    events: Mapped[list[SubmissionEvent]] = relationship(
        back_populates="submission", order_by="SubmissionEvent.id", cascade="all, delete-orphan"
    )


class SubmissionEvent(Base):
    """One timestamped state transition of a submission."""

    __tablename__ = "submission_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    submission_id: Mapped[str] = mapped_column(
        ForeignKey("submissions.id", ondelete="CASCADE"), index=True
    )
    from_status: Mapped[str | None] = mapped_column(String(16), nullable=True)
    to_status: Mapped[str] = mapped_column(String(16))
    at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    detail: Mapped[str | None] = mapped_column(Text, nullable=True)
    worker: Mapped[str | None] = mapped_column(String(64), nullable=True)

    submission: Mapped[Submission] = relationship(back_populates="events")


class OrganiserSession(Base):
    """A signed-in organiser page session: the hash of an opaque cookie value, and its expiry."""

    __tablename__ = "organiser_sessions"

    id_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"))
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)

    team: Mapped[Team] = relationship()


class BoardVersion(Base):
    """One row whose ``version`` grows with every change to a submission, in the change's own
    transaction: the leaderboard's pages are cached per version (``evaluator.crud``).

    ``unmarked_version`` is the version of the last change that no submission's
    ``board_version`` shows (a deleted submission): a reader that kept rows read at an older
    version reads every row again.
    """

    __tablename__ = "board_version"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[int] = mapped_column(BigInteger)
    unmarked_version: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")


class WorkerState(enum.StrEnum):
    """States of a scoring worker: starting -> ready -> stopped, or starting -> refused."""

    STARTING = "starting"
    READY = "ready"
    REFUSED = "refused"
    STOPPED = "stopped"


class Worker(Base):
    """A scoring worker process (embedded in ``pflkit serve`` or a ``pflkit worker``) and its
    heartbeat: a worker is live while it is ``ready`` and its last beat is recent
    (``evaluator.crud.workers``); one that refused to start keeps its reason here."""

    __tablename__ = "workers"
    __table_args__ = (Index("ix_workers_state_beat", "state", "last_beat_at"),)

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    embedded: Mapped[bool] = mapped_column(Boolean, default=False)
    state: Mapped[str] = mapped_column(String(16), default=WorkerState.STARTING.value)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    started_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_beat_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    # The submissions it is scoring now (space-separated ids; empty when idle).
    holding: Mapped[str] = mapped_column(Text, default="", server_default="")


class PersonalMetadata(BaseModel):
    """``submission.json``'s ``personal`` (track 3)."""

    model_config = ConfigDict(extra="allow")

    #: the log round that sends the final global model to the clients before they personalise
    #: it (after the federated rounds; None when nothing is sent).
    log_round: int | None = Field(default=None, ge=0, le=1_000_000)


class PretrainingMetadata(BaseModel):
    """``submission.json``'s ``pretraining``: federated pre-training rounds logged before the
    fine-tuning rounds (``evaluator.validation.commlog``)."""

    model_config = ConfigDict(extra="allow")

    rounds: int = Field(ge=1, le=1_000_000)
    clients_per_round: int = Field(ge=1, le=100_000)


class SubmissionMetadata(BaseModel):
    """The ``metadata`` part of an upload (``submission.json`` of a run directory).

    ``rounds`` may be 0: track 3's ``local-only`` federates nothing.
    """

    model_config = ConfigDict(extra="allow")

    track: int
    method: str = Field(min_length=1, max_length=200)
    description: str = Field(default="", max_length=10_000)
    clients: int | None = Field(default=None, ge=1, le=100_000)
    clients_per_round: int | None = Field(default=None, ge=1, le=100_000)
    rounds: int | None = Field(default=None, ge=0, le=1_000_000)
    sampling: Literal["fixed", "poisson"] | None = None
    personal: PersonalMetadata | None = None
    pretraining: PretrainingMetadata | None = None

    @field_validator("track", mode="before")
    @classmethod
    def _integer_track(cls, value: Any) -> Any:
        """A track of ``benchmark.tracks.TRACKS``, read when validated (a track added later
        counts); ``true`` equals 1 in Python but is no track number: only JSON integers are."""
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"track must be a JSON integer, got {value!r}")
        if value not in TRACKS:
            raise ValueError(f"track must be {track_numbers()}, got {value}")
        return value

    def official_logger_bytes(self) -> int | None:
        """The declared ``official_logger_total_bytes``: what the official starter kit's logger
        would have counted for the run (``pflkit train`` writes it), the figure of the
        competition's published tables.

        Shown beside the evaluator's own tally, never ranked and not checked, so a missing or
        malformed value is not an error.

        Returns:
            The value when it is a JSON integer in 0 .. 2**63 - 1, else None.
        """
        value = (self.model_extra or {}).get("official_logger_total_bytes")
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
            return None
        return value


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
