"""The worker process (``pflkit worker``): its registration and heartbeat, start-up checks, the
reaper and the queue's consumer."""

from __future__ import annotations

import logging
import time

from evaluator.core.config import Settings
from evaluator.queue import TaskQueue
from evaluator.readiness import ThresholdAtOrBelowBase, check_readiness
from evaluator.tables import WorkerState
from evaluator.worker.liveness import WorkerPresence
from evaluator.worker.reaper import Reaper
from evaluator.worker.reproducer import Reproducer
from evaluator.worker.runner import JobRunner, worker_name

logger = logging.getLogger("evaluator.worker")


def run_worker(settings: Settings, *, parent_pid: int | None = None) -> None:
    """Run a scoring worker until SIGINT/SIGTERM (the body of ``pflkit worker``).

    Args:
        settings: the service settings.
        parent_pid: for the worker embedded in ``pflkit serve``: stop when that process dies.
    """
    from evaluator.core.db import migrate
    from evaluator.queue import install_handler

    migrate(settings.db_url)
    presence = WorkerPresence(settings, embedded=parent_pid is not None).register()
    try:
        runner = _prepare(settings)
    except ThresholdAtOrBelowBase as exc:
        presence.stop(WorkerState.REFUSED, str(exc))
        raise SystemExit(f"pflkit worker: refusing to start: {exc}") from None
    except (KeyboardInterrupt, SystemExit):
        presence.stop()
        raise
    except Exception as exc:
        # The type only: a message could quote a path or a record of the hidden split.
        presence.stop(
            WorkerState.REFUSED,
            f"start-up failed: {type(exc).__name__} (the worker's log has the details)",
        )
        raise
    presence.mark(WorkerState.READY)
    runner.presence = presence
    install_handler(runner)
    reaper = Reaper(settings, runner.queue, parent_pid=parent_pid)
    reaper.start()
    reproducer = None
    if any(policy != "off" for policy in settings.reproduction.values()):
        reproducer = Reproducer(settings, runner.queue, worker_name())
        reproducer.start()
    consumer = runner.queue.huey.create_consumer(
        workers=settings.worker_threads,
        worker_type="thread",
        initial_delay=0.05,
        backoff=1.5,
        max_delay=1.0,
        check_worker_health=True,
    )
    try:
        consumer.run()
    finally:
        reaper.stopped.set()
        if reproducer is not None:
            reproducer.stopped.set()
        presence.stop()


def _prepare(settings: Settings) -> JobRunner:
    """The job runner with its test split, reference model and canaries loaded, and the base
    scored against the threshold in force (``evaluator.readiness.check_readiness``).

    Raises:
        ThresholdAtOrBelowBase: the threshold would let the untouched base rank.
    """
    if settings.torch_threads:
        import torch

        torch.set_num_threads(settings.torch_threads)
    queue = TaskQueue(settings.queue, name=settings.queue_name)
    runner = JobRunner(settings, queue)
    started = time.perf_counter()
    runner.scorer.prepare()
    runner.auditor.prepare()
    # The thresholds in force: benchmark.json, else the settings (the leaderboard's lookup too).
    from benchmark.threshold import thresholds_in_force

    check_readiness(runner, thresholds=thresholds_in_force(settings.data_dir))
    logger.info(
        "worker ready in %.1f s (test split, reference model and canary baseline loaded, "
        "base model scored)",
        time.perf_counter() - started,
    )
    return runner
