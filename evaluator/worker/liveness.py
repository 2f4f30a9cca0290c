"""A worker's entry in the ``workers`` table: registered at start, a beat every
``worker_beat_seconds`` with the submissions it holds, ``ready`` once its start-up checks pass,
``refused`` with the reason when they fail, ``stopped`` when it exits cleanly.

A worker killed with SIGKILL leaves its row ``ready`` and silent: after three missed beats it no
longer counts as live (``evaluator.crud.workers.liveness``).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid

from evaluator import crud
from evaluator.core.config import Settings
from evaluator.core.db import session_scope
from evaluator.tables import WorkerState

logger = logging.getLogger("evaluator.worker")


class WorkerPresence(threading.Thread):
    """Registers this worker process and beats until stopped.

    Args:
        settings: the service settings (database and beat interval).
        embedded: whether ``pflkit serve`` started this worker.
    """

    def __init__(self, settings: Settings, *, embedded: bool) -> None:
        super().__init__(name="worker-presence", daemon=True)
        self.settings, self.embedded = settings, embedded
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.worker = f"{self.host[:40]}:{self.pid}:{uuid.uuid4().hex[:8]}"
        self.stopped = threading.Event()
        self.state = WorkerState.STARTING
        self._holding: list[str] = []
        self._lock = threading.Lock()

    def register(self) -> WorkerPresence:
        """Record this worker as starting and start beating."""
        with session_scope(self.settings.db_url) as session:
            crud.register_worker(
                session, name=self.worker, host=self.host, pid=self.pid, embedded=self.embedded
            )
        self.start()
        return self

    def hold(self, submission_id: str) -> None:
        """Note a job this worker scores (shown until :meth:`release`)."""
        with self._lock:
            self._holding.append(submission_id)
        self._beat()

    def release(self, submission_id: str) -> None:
        """Note that a job ended."""
        with self._lock:
            if submission_id in self._holding:
                self._holding.remove(submission_id)
        self._beat()

    def mark(self, state: WorkerState, reason: str | None = None) -> None:
        """Record a new state (a failure to record it is logged, never raised: the next beat
        writes the state again)."""
        self.state = state
        try:
            with session_scope(self.settings.db_url) as session:
                crud.set_worker_state(session, name=self.worker, state=state, reason=reason)
        except Exception as exc:
            logger.warning("could not record worker state %s: %s", state.value, type(exc).__name__)

    def stop(self, state: WorkerState = WorkerState.STOPPED, reason: str | None = None) -> None:
        """Stop beating and record the final state."""
        self.stopped.set()
        if self.is_alive():
            self.join(timeout=5)
        self.mark(state, reason)

    def _beat(self) -> None:
        with self._lock:
            holding = list(self._holding)
        try:
            with session_scope(self.settings.db_url) as session:
                crud.beat(session, name=self.worker, holding=holding, state=self.state)
        except Exception as exc:  # the database is down: the next beat tries again
            logger.warning("worker heartbeat failed: %s", type(exc).__name__)

    def run(self) -> None:
        while not self.stopped.wait(self.settings.worker_beat_seconds):
            self._beat()
