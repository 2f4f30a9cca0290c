"""The scoring worker ``pflkit serve`` runs next to its API, and the watch that stops the service
when that worker dies or refuses to start.

Without the watch, a worker that refused to start (a track-1 threshold at or below the base, a
missing test split) left an API that accepted uploads no one would ever score. The watch polls
the child process; when it exits without being asked to, the watch records why (the worker's
own reason from the ``workers`` table when it refused) and sends SIGTERM to the serving process,
which shuts its server down gracefully and exits non-zero with that reason
(:attr:`EmbeddedWorker.failure`).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading

from evaluator import crud
from evaluator.core.config import Settings
from evaluator.core.db import session_scope
from evaluator.tables import WorkerState

logger = logging.getLogger("evaluator.worker")
#: how often the watch looks at the child
POLL_SECONDS = 0.2
#: exit codes of a worker stopped on purpose (SIGINT or SIGTERM from a terminal or a
#: supervisor that stops the whole process group): not a failure
DELIBERATE_EXITS = (0, -signal.SIGINT, -signal.SIGTERM)


class EmbeddedWorker:
    """A ``pflkit worker`` child process and the thread that watches it.

    Args:
        settings: the service settings (passed to the child as its environment).
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.process: subprocess.Popen[bytes] | None = None
        #: why the worker stopped when nobody asked it to (None while it runs or after
        #: :meth:`stop`)
        self.failure: str | None = None
        self._stopping = threading.Event()
        self._watch = threading.Thread(target=self._run_watch, name="worker-watch", daemon=True)

    def start(self) -> EmbeddedWorker:
        """Start the worker process and its watch."""
        env = {
            **os.environ,
            **self.settings.environment(),
            "PFLKIT_EVALUATOR_PARENT_PID": str(os.getpid()),
        }
        self.process = subprocess.Popen([sys.executable, "-m", "pflkit", "worker"], env=env)
        self._watch.start()
        return self

    def stop(self) -> None:
        """Stop the worker (SIGTERM, then SIGKILL after 30 s) without calling it a failure."""
        self._stopping.set()
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)

    def _run_watch(self) -> None:
        assert self.process is not None
        while not self._stopping.wait(POLL_SECONDS):
            code = self.process.poll()
            if code is None:
                continue
            if self._stopping.is_set() or code in DELIBERATE_EXITS:
                return
            self.failure = self._reason(code)
            logger.error("%s; stopping the service", self.failure)
            os.kill(os.getpid(), signal.SIGTERM)
            return

    def _reason(self, code: int) -> str:
        """The worker's refusal as it recorded it, else how it exited."""
        assert self.process is not None
        try:
            with session_scope(self.settings.db_url) as session:
                row = crud.worker_by_pid(session, host=socket.gethostname(), pid=self.process.pid)
                state, reason = (row.state, row.reason) if row is not None else (None, None)
        except Exception as exc:
            logger.warning("could not read the worker's record: %s", type(exc).__name__)
            state, reason = None, None
        if state == WorkerState.REFUSED.value and reason:
            return f"the embedded scoring worker refused to start: {reason}"
        how = f"signal {-code}" if code < 0 else f"code {code}"
        return (
            f"the embedded scoring worker exited ({how}); its log is above. Run `pflkit serve "
            "--no-worker` with `pflkit worker` processes to keep the API up without it"
        )
