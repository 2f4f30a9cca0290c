"""The evaluator's database tables (one class per table) and the values of their state columns.

Tables: ``teams`` (hashed API tokens, organiser role), ``submissions`` (one row per upload with
its state, timestamps, lease and the figures every track has,
``benchmark.result_figures.SHARED_FIGURES``), ``submission_figures`` (each track's own figures,
keyed by name), ``submission_events`` (each state transition, timestamped),
``organiser_sessions``, ``board_version`` and ``workers`` (each scoring worker's heartbeat and,
for one that refused to start, why).
"""

from __future__ import annotations

import datetime as dt
import enum
import numbers
from typing import Any

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

from benchmark.result_figures import Figure
from benchmark.tracks import track_figures


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
            raise ValueError("naive datetimes are not stored; use evaluator.tables.utcnow()")
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
    #: the model family of the checkpoint (``benchmark.model.families``; submission.json's)
    family: Mapped[str] = mapped_column(String(40), default="vt5", server_default="vt5")
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
    #: its track's own figures (``benchmark.tracks.Track.figures``), one row each.
    figure_rows: Mapped[list[SubmissionFigure]] = relationship(
        order_by="SubmissionFigure.figure", cascade="all, delete-orphan"
    )

    @property
    def figures(self) -> dict[str, Any]:
        """Every track's own figures by name (``benchmark.tracks.track_figures``), with the
        values this submission has and None for the others."""
        values = {name: None for name in track_figures()}
        values.update((row.figure, row.value) for row in self.figure_rows)
        return values


class SubmissionFigure(Base):
    """One figure of a submission's track (``benchmark.tracks.Track.figures``), keyed by name: a
    track with a figure of its own needs no migration. Numbers (float, int, bool) are in
    ``number``, text and JSON documents in ``document``; a figure without a value has no row."""

    __tablename__ = "submission_figures"

    submission_id: Mapped[str] = mapped_column(
        ForeignKey("submissions.id", ondelete="CASCADE"), primary_key=True
    )
    figure: Mapped[str] = mapped_column(String(64), primary_key=True)
    number: Mapped[float | None] = mapped_column(Float, nullable=True)
    document: Mapped[Any] = mapped_column(JSON(none_as_null=True), nullable=True)

    @property
    def value(self) -> Any:
        """The value as its declaration's kind (an undeclared figure's as stored)."""
        return typed_value(figure_kinds().get(self.figure), self.number, self.document)


def stored_value(figure: Figure, value: Any) -> tuple[float | None, Any]:
    """A figure's value as the ``(number, document)`` of its ``submission_figures`` row.

    Raises:
        ValueError: a value its kind cannot hold.
    """
    if figure.kind in ("text", "json"):
        return None, value
    allowed = {"bool": bool, "int": numbers.Integral, "float": numbers.Real}[figure.kind]
    if not isinstance(value, allowed) or (figure.kind != "bool" and isinstance(value, bool)):
        raise ValueError(f"figure {figure.name} is {figure.kind}, got {value!r}")
    if figure.kind == "int" and abs(value) > 2**53:
        raise ValueError(f"figure {figure.name}: {value} is beyond a double's exact integers")
    return float(value), None  # a double holds every float and int figure exactly


def figure_kinds() -> dict[str, str]:
    """Every track figure's kind by name (read once per query by the callers of
    :func:`typed_value`)."""
    return {name: figure.kind for name, figure in track_figures().items()}


def typed_value(kind: str | None, number: float | None, document: Any) -> Any:
    """A ``submission_figures`` row's value as its figure's ``kind`` (``None``: a figure no track
    declares now, as stored): ``number`` as an int, a flag or a float, else ``document``."""
    if number is None:
        return document
    if kind == "int":
        return int(number)
    if kind == "bool":
        return bool(number)
    return number


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
