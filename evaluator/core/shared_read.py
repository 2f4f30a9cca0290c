"""One database read shared by every request that arrived while the previous one ran.

Two hundred readers polling the leaderboard each need the board version, and each must see a
version read after it arrived (a score that committed before a request must show in its answer,
the leaderboard's view cache); a status poll must have its token checked after it arrived (a revoked
token is refused at once). Reading once per request costs a worker thread, a session and a
query each. :class:`SharedRead` reads for all of them: a request that finds no read waiting to
start schedules one and adds its key (a token's hash, say); the requests arriving before that
read starts add theirs and share it; while it runs, the next arrivals gather for the following
read. Every caller gets a value read after it called, and the database sees one read at a time
per process and kind of read, however many requests wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Mapping
from typing import Generic, TypeVar

from anyio import CapacityLimiter, to_thread

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class SharedRead(Generic[K, V]):
    """Coalesce concurrent look-ups by a blocking ``read`` of many keys at once (in one event
    loop).

    ``read`` runs in a worker thread under a limiter of its own, so that it never queues behind
    the requests that hold the app's thread pool. Not thread-safe: one event loop uses it (an
    API process's).

    Args:
        read: the blocking read of a set of keys; returns the values found (a key left out:
            nothing found, :meth:`get` answers None).

    Example:
        >>> import asyncio
        >>> reads = []
        >>> shared = SharedRead(lambda keys: reads.append(keys) or {k: k * 2 for k in keys})
        >>> async def readers():
        ...     return await asyncio.gather(*(shared.get(k % 3) for k in range(100)))
        >>> values = asyncio.run(readers())
        >>> values[:4], len(reads) < 100
        ([0, 2, 4, 0], True)
    """

    def __init__(self, read: Callable[[frozenset[K]], Mapping[K, V]]) -> None:
        self._read = read
        self._limiter: CapacityLimiter | None = None
        self._running = False
        self._next: asyncio.Future[Mapping[K, V]] | None = None
        self._next_keys: set[K] = set()
        self._task: asyncio.Future[None] | None = None
        #: reads done (each shared by every caller that waited for it)
        self.reads = 0

    async def get(self, key: K) -> V | None:
        """The value of ``key`` from a read that started after this call (shared with the calls
        around it); None when the read found nothing for it.

        Raises:
            Exception: whatever ``read`` raised (every caller of that read sees it).
        """
        future = self._next
        if future is None:
            future = self._next = asyncio.get_running_loop().create_future()
            future.add_done_callback(_retrieve)
        self._next_keys.add(key)
        if not self._running:
            self._start()
        # shield: a caller that goes away (a closed connection) leaves the read to the others
        found = await asyncio.shield(future)
        return found.get(key)

    def _start(self) -> None:
        future, keys = self._next, frozenset(self._next_keys)
        assert future is not None
        self._next, self._next_keys = None, set()
        self._running = True
        self._task = asyncio.ensure_future(self._run(future, keys))  # kept: the loop holds it weakly

    async def _run(self, future: asyncio.Future[Mapping[K, V]], keys: frozenset[K]) -> None:
        if self._limiter is None:
            self._limiter = CapacityLimiter(1)
        try:
            found = await to_thread.run_sync(self._read, keys, limiter=self._limiter)
        except Exception as exc:  # every waiter sees the read's failure
            future.set_exception(exc)
        except BaseException:  # the loop is shutting down
            future.cancel()
            raise
        else:
            self.reads += 1
            future.set_result(found)
        finally:
            self._running = False
            if self._next is not None:
                self._start()


def _retrieve(future: asyncio.Future) -> None:
    """Mark a failed read's exception as seen when every waiter has gone."""
    if not future.cancelled():
        future.exception()
