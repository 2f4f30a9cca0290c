"""The Huey task queue that carries submission ids to the scoring workers.

The queue only says "look at submission X"; the database holds the authoritative job state.
A task whose submission cannot be claimed (already scored, or held by a live worker) is a no-op,
so duplicate or replayed tasks are harmless, and a task lost with a killed worker is re-sent by
the reaper (:mod:`evaluator.worker`). SQLite storage serves one machine; Redis several. The
queue must stay private to the organisers: Huey serialises its messages with pickle.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from huey import Huey, RedisHuey, SqliteHuey

TASK_NAME = "score_submission"
_handler: Callable[[str], object] | None = None


def score_submission(submission_id: str) -> object:
    """The task body: hand the id to this process's job runner (set by the worker)."""
    if _handler is None:
        raise RuntimeError("no scoring handler installed in this process; run `pflkit worker`")
    return _handler(submission_id)


def install_handler(handler: Callable[[str], object]) -> None:
    """Set the function that scores a submission id in this worker process."""
    global _handler
    _handler = handler


class TaskQueue:
    """A Huey instance with the scoring task registered.

    Args:
        url: ``sqlite:///PATH`` or ``redis://HOST:PORT/DB``.
        name: queue name (several kits can share one Redis with different names).
    """

    def __init__(self, url: str, *, name: str = "pflkit-evaluator") -> None:
        self.url = url
        if url.startswith(("redis://", "rediss://")):
            self.huey: Huey = RedisHuey(name, url=url, results=False)
        elif url.startswith("sqlite:///"):
            path = Path(url[len("sqlite:///") :])
            path.parent.mkdir(parents=True, exist_ok=True)
            self.huey = SqliteHuey(name, filename=str(path), results=False)
        else:
            raise ValueError(
                f"unsupported queue URL {url!r}: use sqlite:///PATH or redis://HOST:PORT/DB"
            )
        self._task = self.huey.task(name=TASK_NAME)(score_submission)

    def enqueue(self, submission_id: str, *, delay: float = 0.0) -> None:
        """Ask a worker to score ``submission_id`` (after ``delay`` seconds)."""
        if delay > 0:
            self._task.schedule(args=(submission_id,), delay=delay)
        else:
            self._task(submission_id)

    def pending(self) -> int:
        """Tasks waiting in the queue (scheduled retries not included)."""
        return self.huey.pending_count()

    def close(self) -> None:
        """Release the queue's connections."""
        close = getattr(self.huey.storage, "close", None)
        if close is not None:
            close()
