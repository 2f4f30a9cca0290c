"""Serialised status views, kept per submission, precision and board version (one per process).

The board version grows in the transaction of every change to a submission (its state, its
results, an organiser's action; ``crud.board_changed``), so a view read at version V is exact
for as long as the version is V. A status request then costs one short query, the caller by its
token joined to the current version (``crud.caller_by_token``), and a dictionary look-up: the
token is checked on every request (a revoked one is refused at once) and the view is shown only
to its team or an organiser, as the full read does.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from evaluator.crud import Caller

MAX_VIEWS = 2048


class StatusViews:
    """A thread-safe LRU of ``(submission id, full precision, board version)`` -> the owner
    team's id and the JSON body.

    Args:
        max_views: entries kept; the least recently used goes first.
    """

    def __init__(self, max_views: int = MAX_VIEWS) -> None:
        self.max_views = max_views
        self._views: OrderedDict[tuple[str, bool, int], tuple[int, bytes]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, submission_id: str, caller: Caller) -> tuple[int, bytes] | None:
        """The owner's team id and the body for ``caller`` at the caller's board version."""
        key = (submission_id, caller.is_organiser, caller.board_version)
        with self._lock:
            hit = self._views.get(key)
            if hit is not None:
                self._views.move_to_end(key)
            return hit

    def put(self, submission_id: str, caller: Caller, owner_team_id: int, body: bytes) -> None:
        """Keep a body read at ``caller.board_version``."""
        key = (submission_id, caller.is_organiser, caller.board_version)
        with self._lock:
            self._views[key] = (owner_team_id, body)
            self._views.move_to_end(key)
            while len(self._views) > self.max_views:
                self._views.popitem(last=False)
