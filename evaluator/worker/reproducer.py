"""The worker's reproducer: re-runs the selected submissions' recipes, behind scoring.

A thread beside the scoring consumer: when the scoring queue is empty it claims the oldest
queued re-run (:mod:`evaluator.crud.reproductions`), re-runs the stored submission's recipe in
the sandbox on the worker's benchmark directory (:func:`evaluator.reproduction.rerun.reproduce`)
and records the verdict. Scoring is never blocked: a re-run is a sandboxed process of its own,
and a scoring job that arrives meanwhile is taken by the consumer as usual. A re-run held by a
worker that died is queued again once it is older than twice its CPU-time limit.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from typing import Any

from benchmark.model.families import DEFAULT_FAMILY
from benchmark.submission_contract import stored_name
from evaluator import crud
from evaluator.core.config import Settings
from evaluator.core.db import session_scope
from evaluator.queue import TaskQueue
from evaluator.reproduction.verdict import FAILED
from evaluator.storage import SubmissionStore

logger = logging.getLogger("evaluator.reproducer")
#: seconds between two looks at the queue
POLL_SECONDS = 2.0


def selected(settings: Settings, track: int) -> bool:
    """Whether the policy re-runs the finished submissions of ``track``."""
    return settings.reproduction.get(track, "off") == "all"


def reproduce_stored(settings: Settings, store: SubmissionStore, submission_id: str, track: int,
                     family: str = DEFAULT_FAMILY) -> dict[str, Any]:  # fmt: skip
    """The re-run of one stored submission of ``track`` and model ``family`` (from the
    organisers' reference of that family): outcome, reason and report."""
    from benchmark.model.loading import resolve_checkpoint
    from evaluator.reproduction.rerun import reproduce
    from evaluator.reproduction.sandbox import SandboxLimits, sandbox_unavailable
    from evaluator.reproduction.verdict import FAILED, RunFiles

    unavailable = sandbox_unavailable()
    if unavailable is not None:
        return {"outcome": FAILED, "reason": f"the evaluator's sandbox cannot run: {unavailable}",
                "report": {}}  # fmt: skip
    directory = store.directory(submission_id)
    limits = SandboxLimits(cpu_seconds=settings.reproduction_cpu_seconds,
                           wall_seconds=2.0 * settings.reproduction_cpu_seconds,
                           memory_bytes=settings.reproduction_memory_bytes)  # fmt: skip
    result = reproduce(RunFiles.of_stored_submission(directory), directory / stored_name("recipe"),
                       settings.data_dir, limits=limits, threads=settings.reproduction_threads,
                       tolerance=settings.tolerance_of(track),
                       base_dir=resolve_checkpoint(settings.reference_of(family)))  # fmt: skip
    report = result.as_dict()
    return {"outcome": result.verdict.outcome, "reason": result.verdict.reason, "report": report}


class Reproducer(threading.Thread):
    """Claims and re-runs queued reproductions while the scoring queue is empty."""

    def __init__(self, settings: Settings, queue: TaskQueue, worker: str) -> None:
        super().__init__(name="reproducer", daemon=True)
        self.settings = settings
        self.queue = queue
        self.worker = worker
        self.store = SubmissionStore(settings.storage_dir)
        self.stopped = threading.Event()

    def run(self) -> None:
        """Until stopped: requeue abandoned re-runs, then run one when scoring is idle."""
        abandoned = dt.timedelta(seconds=2.0 * self.settings.reproduction_cpu_seconds + 60)
        while not self.stopped.wait(POLL_SECONDS):
            try:
                with session_scope(self.settings.db_url) as session:
                    crud.requeue_abandoned_reproductions(session, older_than=abandoned)
                if self.queue.pending() == 0:
                    self.run_one()
            except Exception:  # the thread must outlive one bad re-run or a database blip
                logger.exception("the reproducer's loop failed once; it goes on")

    def run_one(self) -> str | None:
        """Claim and re-run one queued submission; its id, or None when none was queued."""
        with session_scope(self.settings.db_url) as session:
            claimed = crud.claim_reproduction(session, worker=self.worker)
        if claimed is None:
            return None
        submission_id = claimed.id
        logger.info("re-running submission %s", submission_id)
        try:
            verdict = reproduce_stored(self.settings, self.store, submission_id, claimed.track,
                                       claimed.family)  # fmt: skip
        except Exception as error:  # recorded, so the row does not wait for the requeue
            logger.exception("re-running %s raised", submission_id)
            verdict = {"outcome": FAILED, "reason": "the evaluator could not re-run it "
                       f"({type(error).__name__}); the organisers have the log", "report": {}}
        with session_scope(self.settings.db_url) as session:
            crud.record_reproduction(session, submission_id=submission_id, worker=self.worker,
                                     **verdict)  # fmt: skip
        logger.info("submission %s: %s", submission_id, verdict["outcome"])
        return submission_id
