"""The ``top k`` reproduction policy: the leaderboard selects the submissions the workers re-run.

Organisers choose per track which finished submissions are re-run from their recipe
(``Settings.reproduction``: ``off``, ``all`` or a number k). ``all`` is the worker's own choice,
made when a score lands. The top k of each ranking needs the ranking rules, which are the
leaderboard's, so the selection happens here: whenever the board's version moves, the
submissions among the first k of each of the track's tables (one per privacy budget) that were
never selected are queued (:func:`evaluator.crud.queue_reproduction`, which selects a submission
once). A submission found not reproduced leaves the ranking, the next one moves up into the top
k and is selected in its turn; one waiting for its re-run stays ranked meanwhile.

It runs in every API process of ``pflkit serve`` (a lifespan service of ``pflkit.app``);
selecting twice is harmless.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from evaluator import crud
from evaluator.core.db import session_scope
from leaderboard.board import Board
from leaderboard.views import board
from leaderboard.warmer import ViewWarmer


def top_k_policies(policies: Mapping[int, str | int]) -> dict[int, int]:
    """The tracks whose policy is a number k, with their k."""
    return {track: policy for track, policy in policies.items() if isinstance(policy, int)}


def to_reproduce(ranked_board: Board, policies: Mapping[int, str | int]) -> list[str]:
    """The ids in the top k of each table of each ``top k`` track that were never selected.

    Args:
        ranked_board: the organisers' board (each team's best; hidden submissions are out).
        policies: ``Settings.reproduction``.

    Returns:
        Submission ids, each once, in table order.
    """
    chosen: list[str] = []
    for track, k in top_k_policies(policies).items():
        result = ranked_board.tracks.get(track)
        for table in result.tables.values() if result is not None else ():
            for ranked in table.ranked[:k]:
                if ranked.row.reproduction is None and ranked.row.id not in chosen:
                    chosen.append(ranked.row.id)
    return chosen


def select_top_k(app: Any) -> list[str]:
    """Queue the re-runs the ``top k`` policies ask for now; the ids queued by this call."""
    settings = app.state.settings
    with app.state.sessions() as session:
        ranked_board = board(app, session, all_submissions=False, public=False)
    queued = []
    with session_scope(settings.db_url) as session:
        for submission_id in to_reproduce(ranked_board, settings.reproduction):
            if crud.queue_reproduction(session, submission_id=submission_id):
                queued.append(submission_id)
    return queued


@contextmanager
def select_reproductions(app: Any) -> Iterator[None]:
    """Select the top k for re-running after every change of the board (a lifespan service of
    ``pflkit.app``; nothing runs when no track has a ``top k`` policy)."""
    if not top_k_policies(app.state.settings.reproduction):
        yield
        return

    def read_version() -> int:
        with app.state.sessions() as session:
            return crud.board_version(session)

    # The warmer's loop: one indexed read of the version per interval, the selection when it
    # moved; the one "view" it keeps is the selection, never forgotten.
    selector = ViewWarmer(read_version, interval=1.0, keep_seconds=math.inf)
    selector.served("top-k reproductions", lambda: select_top_k(app))
    with selector.running():
        yield
