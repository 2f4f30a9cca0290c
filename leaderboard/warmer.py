"""Build the leaderboard's views again as soon as the board version moves, before a reader asks.

One thread per API process polls the board version (one indexed read every ``interval``
seconds, or at once when a reader's read of the version saw it move: :meth:`ViewWarmer.saw`).
When it moved, the thread rebuilds the public views that readers asked for in the
last ``keep_seconds``, the page first, through the page cache, so the first
reader after a score lands usually finds the new view built; when the board moves again
meanwhile, it starts over with the newest version rather than finish stale views. Correctness never depends on it: a reader that comes first builds the
view itself (or waits for the build in progress, see ``leaderboard.cache``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any

logger = logging.getLogger("leaderboard.warmer")
INTERVAL_SECONDS = 0.2
KEEP_SECONDS = 120.0


class ViewWarmer:
    """Rebuilds recently served views after each change of the board version.

    Args:
        read_version: the board's current version (a short read of the database).
        interval: seconds between two reads of the version.
        keep_seconds: a view not asked for in this long is no longer rebuilt.
    """

    def __init__(
        self,
        read_version: Callable[[], int],
        *,
        interval: float = INTERVAL_SECONDS,
        keep_seconds: float = KEEP_SECONDS,
    ) -> None:
        self.read_version = read_version
        self.interval = interval
        self.keep_seconds = keep_seconds
        self._views: dict[Hashable, tuple[Callable[[], Any], float, int]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._seen: int | None = None
        self._thread: threading.Thread | None = None
        self.rebuilds = 0

    def served(self, name: Hashable, rebuild: Callable[[], Any], *, priority: int = 1) -> None:
        """Note that a reader asked for view ``name``; ``rebuild`` builds its current version.

        Views of a lower ``priority`` number are rebuilt first (the page before the plots and
        exports, which take seconds to build with 10,000 submissions).
        """
        with self._lock:
            self._views[name] = (rebuild, time.monotonic(), priority)

    def saw(self, version: int) -> None:
        """A reader read ``version``: when the warmer has not seen it yet, wake it now rather
        than at its next poll (the readers' shared read notices a score first)."""
        if version != self._seen:
            self._wake.set()

    def touch(self, name: Hashable) -> bool:
        """Note that a reader asked for view ``name`` again; False when the warmer does not know
        it (a reader must call :meth:`served` with its rebuild)."""
        with self._lock:
            view = self._views.get(name)
            if view is None:
                return False
            self._views[name] = (view[0], time.monotonic(), view[2])
            return True

    def warm_once(self, version: int | None = None) -> None:
        """Rebuild every view asked for within ``keep_seconds`` by priority, then the most
        recently asked first (and forget the others); stop early when the board moved past
        ``version`` meanwhile."""
        now = time.monotonic()
        with self._lock:
            for name in [n for n, view in self._views.items() if now - view[1] > self.keep_seconds]:
                del self._views[name]
            views = sorted(self._views.values(), key=lambda view: (view[2], -view[1]))
        for rebuild, _, _ in views:
            if self._stop.is_set() or (version is not None and self.read_version() != version):
                return
            rebuild()
            self.rebuilds += 1

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                version = self.read_version()
                if version == self._seen:
                    self._wake.wait(self.interval)
                    self._wake.clear()
                    continue
                self._seen = version
                self.warm_once(version)
            except Exception:  # the next poll tries again; readers build what they need
                logger.exception("rebuilding the leaderboard's views failed")
                self._wake.wait(self.interval)
                self._wake.clear()

    @contextmanager
    def running(self) -> Iterator[ViewWarmer]:
        """Run the polling thread for the duration of the block."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="leaderboard-warmer", daemon=True)
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._wake.set()
            self._thread.join(timeout=30)
