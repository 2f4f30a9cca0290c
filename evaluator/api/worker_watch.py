"""What an API process knows of the scoring workers, and what it says about them.

The ``workers`` table (``evaluator.crud.workers``) holds each worker's heartbeat. ``/readyz``
reads it on every probe; the status endpoint, the most polled, reads it through
:class:`WorkerWatch` (at most one query a second per process) to tell a team whose submission
is queued while no worker is live that it waits for one, and since when.
"""

from __future__ import annotations

import datetime as dt
import threading
import time

from sqlalchemy.orm import Session, sessionmaker

from evaluator import crud
from evaluator.crud import Liveness

#: how long an API process reuses its reading of the workers' liveness
WATCH_SECONDS = 1.0


def _at(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).isoformat(timespec="seconds")


def no_worker_reason(liveness: Liveness, *, stale_seconds: float) -> str:
    """Why no worker is live, for ``/readyz`` and the organisers (None of a test answer in it:
    a refusal's reason is the worker's own sentence, an unexpected error only its type)."""
    if liveness.refusal is not None:
        name, reason, at = liveness.refusal
        return f"no scoring worker is live: worker {name} refused to start at {_at(at)}: {reason}"
    if liveness.starting:
        return (
            f"no scoring worker is live yet: {liveness.starting} starting (loading the test "
            "split and scoring the base model)"
        )
    if liveness.last_seen is not None:
        return (
            f"no scoring worker has beaten in the last {stale_seconds:g} s (the last beat was at "
            f"{_at(liveness.last_seen)}): start `pflkit worker` (or `pflkit serve` with its worker)"
        )
    return (
        "no scoring worker has ever started: start `pflkit worker` (or `pflkit serve` without "
        "--no-worker)"
    )


def waiting_since(liveness: Liveness, queued_at: dt.datetime | None) -> dt.datetime | None:
    """Since when a queued submission waits for a worker (None: a worker is live).

    The later of its queueing and the last beat of a ready worker: a submission queued while
    workers ran waits since they stopped.
    """
    if liveness.live:
        return None
    moments = [m for m in (queued_at, liveness.last_seen) if m is not None]
    return max(moments) if moments else None


def waiting_note(since: dt.datetime) -> str:
    """What a team reads on its queued submission while no worker is live."""
    return (
        f"waiting for a scoring worker since {_at(since)}: none is running; the submission "
        "stays queued and is scored when one starts (the organisers see this on their page)"
    )


class WorkerWatch:
    """The workers' liveness as this process last read it, renewed at most every
    ``max_age`` seconds.

    Args:
        sessions: the process's read sessions.
        stale_seconds: a beat older than this does not count (``Settings.worker_stale_seconds``).
        max_age: how long a reading is reused.
    """

    def __init__(
        self,
        sessions: sessionmaker[Session],
        *,
        stale_seconds: float,
        max_age: float = WATCH_SECONDS,
    ) -> None:
        self.sessions, self.stale_seconds, self.max_age = sessions, stale_seconds, max_age
        self._reading: tuple[float, Liveness] | None = None
        self._lock = threading.Lock()

    def current(self) -> Liveness:
        """The liveness, read again when the last reading is older than ``max_age``."""
        with self._lock:
            reading = self._reading
            if reading is not None and time.monotonic() - reading[0] < self.max_age:
                return reading[1]
            with self.sessions() as session:
                liveness = crud.liveness(session, stale_seconds=self.stale_seconds)
            self._reading = (time.monotonic(), liveness)
            return liveness
