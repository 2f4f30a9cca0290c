"""The scoring workers' registry: registration, heartbeats, refusals, and what the service reads
of them (live workers, the queue's depth and age, the last failures).

A worker is *live* while its state is ``ready`` and its last beat is more recent than the
settings' ``worker_stale_seconds``; a killed worker simply stops beating. Rows of workers
silent for :data:`KEEP_SILENT_DAYS` are removed when another worker registers.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from evaluator.tables import Status, Submission, SubmissionEvent, Worker, WorkerState, utcnow

KEEP_SILENT_DAYS = 7
#: the longest ``holding`` kept (ids of the jobs a worker scores at once)
MAX_HOLDING_CHARS = 4000


@dataclass(frozen=True)
class Liveness:
    """What the service knows of its workers at one moment.

    Attributes:
        live: workers ready and beating.
        starting: workers that registered but have not finished their start-up checks, and
            still beat.
        last_seen: the latest beat of a ready worker (None: no worker was ever ready).
        refusal: ``(worker name, reason, when)`` of the latest worker that refused to start,
            when it is more recent than every ready worker's last beat.
    """

    live: int
    starting: int
    last_seen: dt.datetime | None
    refusal: tuple[str, str, dt.datetime] | None


@dataclass(frozen=True)
class QueueState:
    """Submissions waiting to be scored: how many, and since when the oldest waits."""

    depth: int
    oldest_queued_at: dt.datetime | None


def register_worker(
    session: Session,
    *,
    name: str,
    host: str,
    pid: int,
    embedded: bool,
    now: dt.datetime | None = None,
) -> None:
    """Add a starting worker (and forget workers silent for :data:`KEEP_SILENT_DAYS`)."""
    now = now or utcnow()
    session.execute(
        delete(Worker).where(Worker.last_beat_at < now - dt.timedelta(days=KEEP_SILENT_DAYS))
    )
    session.add(
        Worker(
            name=name, host=host[:255], pid=pid, embedded=embedded,
            state=WorkerState.STARTING.value, started_at=now, last_beat_at=now, holding="",
        )
    )  # fmt: skip


def beat(
    session: Session,
    *,
    name: str,
    holding: list[str] | None = None,
    state: WorkerState | None = None,
) -> bool:
    """Renew a worker's heartbeat, what it holds and (when given) its state, so that a state
    change a database hiccup lost is written at the next beat; False when its row is gone."""
    values: dict[str, object] = {"last_beat_at": utcnow()}
    if holding is not None:
        values["holding"] = " ".join(holding)[:MAX_HOLDING_CHARS]
    if state is not None:
        values["state"] = state.value
    result = session.execute(
        update(Worker)
        .where(Worker.name == name)
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    return result.rowcount == 1


def set_worker_state(
    session: Session, *, name: str, state: WorkerState, reason: str | None = None
) -> None:
    """Record a worker's new state (``ready``, ``refused`` with its reason, ``stopped``)."""
    session.execute(
        update(Worker)
        .where(Worker.name == name)
        .values(state=state.value, reason=reason, last_beat_at=utcnow(), holding="")
        .execution_options(synchronize_session=False)
    )


def worker_by_pid(session: Session, *, host: str, pid: int) -> Worker | None:
    """The latest worker registered by process ``pid`` on ``host``."""
    return session.scalar(
        select(Worker)
        .where(Worker.host == host[:255], Worker.pid == pid)
        .order_by(Worker.started_at.desc())
        .limit(1)
    )


def liveness(session: Session, *, stale_seconds: float, now: dt.datetime | None = None) -> Liveness:
    """Live and starting workers, the last beat of a ready one and the latest refusal.

    Args:
        session: open session.
        stale_seconds: a beat older than this does not count.
        now: the clock (default now).

    Returns:
        The workers' liveness.
    """
    now = now or utcnow()
    fresh = now - dt.timedelta(seconds=stale_seconds)
    counts = dict(
        session.execute(
            select(Worker.state, func.count())
            .where(Worker.last_beat_at >= fresh)
            .where(Worker.state.in_((WorkerState.READY.value, WorkerState.STARTING.value)))
            .group_by(Worker.state)
        ).all()
    )
    last_seen = session.scalar(
        select(func.max(Worker.last_beat_at)).where(Worker.state.in_(
            (WorkerState.READY.value, WorkerState.STOPPED.value)))
    )  # fmt: skip
    refused = session.execute(
        select(Worker.name, Worker.reason, Worker.last_beat_at)
        .where(Worker.state == WorkerState.REFUSED.value)
        .order_by(Worker.last_beat_at.desc())
        .limit(1)
    ).first()
    refusal = None
    if refused is not None and (last_seen is None or refused[2] > last_seen):
        refusal = (refused[0], refused[1] or "", refused[2])
    return Liveness(
        live=int(counts.get(WorkerState.READY.value, 0)),
        starting=int(counts.get(WorkerState.STARTING.value, 0)),
        last_seen=last_seen,
        refusal=refusal,
    )


def list_workers(session: Session, *, limit: int = 50) -> list[Worker]:
    """The workers heard from most recently first."""
    return list(session.scalars(select(Worker).order_by(Worker.last_beat_at.desc()).limit(limit)))


def queue_state(session: Session) -> QueueState:
    """How many submissions are queued, and when the oldest of them was queued."""
    depth, oldest = session.execute(
        select(func.count(), func.min(Submission.queued_at)).where(
            Submission.status == Status.QUEUED.value
        )
    ).one()
    return QueueState(depth=int(depth or 0), oldest_queued_at=oldest)


def recent_failures(session: Session, *, limit: int = 10) -> list[SubmissionEvent]:
    """The latest transitions to ``failed`` (internal errors, lost workers, dead uploads)."""
    return list(
        session.scalars(
            select(SubmissionEvent)
            .where(SubmissionEvent.to_status == Status.FAILED.value)
            .order_by(SubmissionEvent.id.desc())
            .limit(limit)
        )
    )
