"""What the organisers watch while a competition runs: the workers, the queue, the failures.

One read of the database (:func:`operations_snapshot`) for the organiser page and its JSON, and
the classification of failures (:func:`failure_kind`) that ``/metrics`` counts by.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from evaluator import crud
from evaluator.tables import WorkerState, utcnow

#: failures by kind: the start of a ``failed`` transition's detail (``evaluator.worker``)
FAILURE_KINDS = (
    ("internal error", "internal_error"),
    ("worker lost", "worker_lost"),
    ("the upload did not complete", "upload_incomplete"),
)


def failure_kind(detail: str | None) -> str:
    """The kind of a failure from its transition's detail: ``internal_error`` (the worker
    raised), ``worker_lost`` (workers died on it ``max_attempts`` times), ``upload_incomplete``
    (the API died mid-upload) or ``other``."""
    for prefix, kind in FAILURE_KINDS:
        if (detail or "").startswith(prefix):
            return kind
    return "other"


@dataclass(frozen=True)
class Operations:
    """The service's state at one moment, as the organiser page shows it.

    Attributes:
        workers: the workers heard from most recently first (name, host, pid, embedded, state,
            reason, started_at, last_beat_at, holding, live).
        live_workers: how many are ready and beating.
        queue_depth: submissions queued.
        oldest_queued_at: when the oldest of them was queued.
        oldest_queued_seconds: how long it has waited.
        failures: the latest failures (submission, at, kind, detail), newest first.
    """

    workers: list[dict[str, Any]]
    live_workers: int
    queue_depth: int
    oldest_queued_at: dt.datetime | None
    oldest_queued_seconds: float | None
    failures: list[dict[str, Any]]

    def as_dict(self) -> dict[str, Any]:
        """The snapshot as JSON-ready values."""

        def value(v: Any) -> Any:
            return v.isoformat(timespec="seconds") if isinstance(v, dt.datetime) else v

        return {
            "workers": [{k: value(v) for k, v in w.items()} for w in self.workers],
            "live_workers": self.live_workers,
            "queue_depth": self.queue_depth,
            "oldest_queued_at": value(self.oldest_queued_at),
            "oldest_queued_seconds": self.oldest_queued_seconds,
            "failures": [{k: value(v) for k, v in f.items()} for f in self.failures],
        }


def operations_snapshot(
    session: Session, *, stale_seconds: float, workers: int = 20, failures: int = 10
) -> Operations:
    """Read the workers, the queue and the latest failures.

    Args:
        session: open session.
        stale_seconds: a beat older than this does not count as live.
        workers: how many workers to list.
        failures: how many failures to list.

    Returns:
        The snapshot.
    """
    now = utcnow()
    fresh = now - dt.timedelta(seconds=stale_seconds)
    rows = []
    for w in crud.list_workers(session, limit=workers):
        live = w.state == WorkerState.READY.value and w.last_beat_at >= fresh
        rows.append(
            {
                "name": w.name, "host": w.host, "pid": w.pid, "embedded": w.embedded,
                "state": w.state if live or w.state != WorkerState.READY.value else "silent",
                "reason": w.reason, "started_at": w.started_at, "last_beat_at": w.last_beat_at,
                "holding": w.holding.split(), "live": live,
            }
        )  # fmt: skip
    queue = crud.queue_state(session)
    oldest = queue.oldest_queued_at
    return Operations(
        workers=rows,
        live_workers=crud.liveness(session, stale_seconds=stale_seconds, now=now).live,
        queue_depth=queue.depth,
        oldest_queued_at=oldest,
        oldest_queued_seconds=(now - oldest).total_seconds() if oldest is not None else None,
        failures=[
            {"submission": e.submission_id, "at": e.at, "kind": failure_kind(e.detail),
             "detail": e.detail}
            for e in crud.recent_failures(session, limit=failures)
        ],
    )  # fmt: skip
