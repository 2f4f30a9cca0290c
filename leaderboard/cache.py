"""The leaderboard's page cache: each view built once per board version and API process.

The evaluator advances the board version in the same transaction as every change to a
submission (a score landing, a rejection, an organiser's hide or disqualify), so a key that
holds the version read at the start of a request is never served after a change has
committed: the next request reads the new version and builds the view again. Entries of old
versions fall out as the least recently used.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

MAX_ENTRIES = 64


class VersionedCache:
    """A small thread-safe LRU mapping of keys (which include the board version) to views.

    Args:
        max_entries: entries kept; the least recently used goes first.
    """

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.builds = 0

    def get(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """The cached value of ``key``, built (outside the lock) when missing."""
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
        value = build()
        with self._lock:
            self.builds += 1
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return value

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()
