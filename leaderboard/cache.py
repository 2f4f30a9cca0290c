"""The leaderboard's page cache: each view built once per board version and API process.

The evaluator advances the board version in the same transaction as every change to a
submission (a score landing, a rejection, an organiser's hide or disqualify), so a key that
holds the version read at the start of a request is never served after a change has
committed: the next request reads the new version and builds the view again. Entries of old
versions fall out as the least recently used.

A key is built by one thread at a time: requests that miss while it is being built wait for
that build instead of repeating it (after a score lands, a hundred concurrent readers cost one
build, not one each). ``leaderboard.warmer`` builds the views readers asked for as soon as the
version moves, so that readers seldom pay a build at all.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

MAX_ENTRIES = 64


class _Build:
    """One build in progress: its waiters block on ``done``."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Any = None
        self.failed = False


class VersionedCache:
    """A small thread-safe LRU mapping of keys (which include the board version) to views.

    Args:
        max_entries: entries kept; the least recently used goes first.
    """

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, Any] = OrderedDict()
        self._building: dict[Hashable, _Build] = {}
        self._lock = threading.Lock()
        self.builds = 0

    def get(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """The cached value of ``key``; built (outside the lock, by one thread) when missing.

        A thread that finds ``key`` being built waits for that build; if it fails, the waiter
        builds the value itself (and so sees the error, if it repeats).
        """
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
            running = self._building.get(key)
            if running is None:
                running = self._building[key] = _Build()
                mine = True
            else:
                mine = False
        if not mine:
            running.done.wait()
            return build() if running.failed else running.value
        try:
            value = build()
        except BaseException:
            running.failed = True
            raise
        else:
            running.value = value
            with self._lock:
                self.builds += 1
                self._entries[key] = value
                self._entries.move_to_end(key)
                while len(self._entries) > self.max_entries:
                    self._entries.popitem(last=False)
        finally:
            with self._lock:
                self._building.pop(key, None)
            running.done.set()
        return value

    def peek(self, key: Hashable) -> Any:
        """The cached value of ``key``, or None when it is not built (never builds nor waits:
        safe in an event loop)."""
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._entries

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()
