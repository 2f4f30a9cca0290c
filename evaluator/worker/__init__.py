"""The scoring worker: claims a submission with a lease, validates and scores it, records once.

A job moves ``queued -> scoring`` by an atomic claim that sets a lease; a heartbeat thread
renews the lease while the checkpoint is scored. The result is written only while this worker
still holds the lease, so if a worker is killed (or stalls past its lease) the reaper re-queues
the job, another worker scores it, and exactly one result is kept. Invalid input ends in
``rejected`` with the reason; an error on our side ends in ``failed`` and is retried up to
``max_attempts`` times.

Modules: ``runner.py`` one job's claim, lease and outcome (``JobRunner``); ``steps.py`` the
checks and scores of a stored submission (``ScoringSteps``); ``reaper.py`` crash recovery
(``reap``, ``Reaper``); ``loop.py`` the worker process (``run_worker``, the body of
``pflkit worker``).
"""

from evaluator.worker.loop import run_worker
from evaluator.worker.reaper import Reaper, reap
from evaluator.worker.runner import JobRunner, worker_name
from evaluator.worker.steps import ScoringSteps, computed_figures

__all__ = [
    "JobRunner",
    "Reaper",
    "ScoringSteps",
    "computed_figures",
    "reap",
    "run_worker",
    "worker_name",
]
