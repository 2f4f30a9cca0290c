"""Crash recovery: jobs whose worker or upload died are re-queued, failed or re-sent.

Every worker runs the reaper periodically; a pass is idempotent, so several workers reaping at
once keep one outcome per submission (each move is a compare-and-set in ``evaluator.crud``).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import threading

from evaluator import crud
from evaluator.core.config import Settings
from evaluator.core.db import session_scope
from evaluator.queue import TaskQueue
from evaluator.storage import SubmissionStore
from evaluator.tables import Status, utcnow

logger = logging.getLogger("evaluator.worker")


def reap(settings: Settings, queue: TaskQueue, store: SubmissionStore) -> dict[str, int]:
    """Recover jobs after crashes; run periodically by every worker (idempotent).

    * ``scoring`` with an expired lease (its worker died): back to ``queued`` and re-sent, or
      ``failed`` once ``max_attempts`` workers have died on it.
    * ``received`` for longer than ``received_timeout_seconds`` (the upload died with the
      server): ``failed`` and its files removed.
    * ``queued`` while the queue is empty (a task lost between commit and enqueue, or with a
      killed worker): re-sent.

    Args:
        settings: the service settings.
        queue: the task queue.
        store: the upload storage.

    Returns:
        How many submissions were re-queued, failed and re-sent.
    """
    now = utcnow()
    counts = {"requeued": 0, "failed": 0, "resent": 0}
    with session_scope(settings.db_url) as session:
        expired = crud.expired_leases(session, now=now)
    for submission_id in expired:
        with session_scope(settings.db_url) as session:
            moved = crud.requeue_expired(
                session, submission_id=submission_id, now=now, max_attempts=settings.max_attempts
            )
        if moved == Status.QUEUED:
            queue.enqueue(submission_id)
            counts["requeued"] += 1
        elif moved == Status.FAILED:
            counts["failed"] += 1
    stale_before = now - dt.timedelta(seconds=settings.received_timeout_seconds)
    with session_scope(settings.db_url) as session:
        for submission_id in crud.stale_received(session, older_than=stale_before):
            if crud.transition(
                session,
                submission_id=submission_id,
                from_status=Status.RECEIVED,
                to_status=Status.FAILED,
                detail="the upload did not complete",
            ):
                store.discard(submission_id)
                counts["failed"] += 1
    if queue.pending() == 0:
        settle = now - dt.timedelta(seconds=settings.reap_interval_seconds)
        with session_scope(settings.db_url) as session:
            waiting = crud.queued(session, older_than=settle)
        for submission_id in waiting:
            queue.enqueue(submission_id)
            counts["resent"] += 1
    if any(counts.values()):
        logger.info("reaper: %s", counts)
    return counts


class Reaper(threading.Thread):
    """Runs :func:`reap` every ``reap_interval_seconds`` (and at once on start)."""

    def __init__(
        self, settings: Settings, queue: TaskQueue, *, parent_pid: int | None = None
    ) -> None:
        super().__init__(name="reaper", daemon=True)
        self.settings, self.queue = settings, queue
        self.store = SubmissionStore(settings.storage_dir)
        self.stopped = threading.Event()
        self.parent_pid = parent_pid

    def run(self) -> None:
        while True:
            try:
                reap(self.settings, self.queue, self.store)
            except Exception as exc:
                logger.warning("reaper pass failed: %s", type(exc).__name__)
            if self.parent_pid is not None and os.getppid() != self.parent_pid:
                logger.warning(
                    "parent process %s is gone; stopping the embedded worker", self.parent_pid
                )
                os.kill(os.getpid(), 15)
                return
            if self.stopped.wait(self.settings.reap_interval_seconds):
                return
