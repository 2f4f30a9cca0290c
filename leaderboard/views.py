"""The leaderboard's public views, cached per board version (``leaderboard.cache``).

One cheap query per request while nothing changes; rebuilt after a score lands or an organiser
acts, from the rows kept since the last build and the submissions changed since
(``leaderboard.kept_rows``). A view takes no session dependency: one worker thread and one
short session each. ``warm_views`` (a lifespan service of ``pflkit.app``) rebuilds the views
readers asked for as soon as the board changes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

from sqlalchemy.orm import Session

from benchmark.info import benchmark_json_files
from benchmark.threshold import thresholds_in_force
from benchmark.tracks import thresholded_tracks
from evaluator import crud
from evaluator.readiness import canaries_present
from leaderboard.board import Board, build_board
from leaderboard.cache import VersionedCache
from leaderboard.kept_rows import kept_rows
from leaderboard.warmer import ViewWarmer

_cache = VersionedCache()


def _thresholds(settings: Any) -> dict[int, tuple[float, str]]:
    """Each thresholded track's threshold, read again only when its file or variable changed."""
    data_dir = getattr(settings, "data_dir", None)
    stamp: list[Any] = [os.environ.get(t.threshold_setting or "") for t in thresholded_tracks()]
    if data_dir is not None:
        stamp.extend(
            (str(path), path.stat().st_mtime_ns) for path in benchmark_json_files(data_dir)
        )
    return _thresholds_at(data_dir, tuple(stamp))


@lru_cache(maxsize=8)
def _thresholds_at(data_dir: Any, _stamp: tuple[Any, ...]) -> dict[int, tuple[float, str]]:
    return thresholds_in_force(data_dir)


def _threshold_key(settings: Any) -> tuple[tuple[int, float], ...]:
    """The thresholds' part of a cached view's key."""
    return tuple((number, value) for number, (value, _) in sorted(_thresholds(settings).items()))


def board(app: Any, session: Session, *, all_submissions: bool, public: bool) -> Board:
    """Rank the database's submissions with the app's threshold (cached per board version).

    Args:
        app: the FastAPI app (its settings name the database and the benchmark).
        session: an open session.
        all_submissions: every submission, not only each team's best.
        public: hide what only organisers see.

    Returns:
        The ranked board.
    """
    settings = app.state.settings
    thresholds = _thresholds(settings)

    def build() -> Board:
        return build_board(
            kept_rows(settings.db_url).read(session),
            thresholds=thresholds,
            all_submissions=all_submissions,
            public=public,
        )

    version = crud.board_version(session)  # first: the rows read after it are no older
    key = (settings.db_url, version, _threshold_key(settings), "board", all_submissions, public)
    return _cache.get(key, build)


def cached_view(
    app: Any, name: Hashable, render: Callable[[Session], bytes], *, priority: int = 1
) -> bytes:
    """A public view's body from the cache, rendered with one short session when missing.

    The app's ``ViewWarmer`` (``pflkit serve``) is told that the view was asked for, so that it
    builds the view again as soon as the board changes (``priority`` 0: before the others).

    Args:
        app: the FastAPI app.
        name: the view's key (with the board version and the threshold).
        render: builds the body from an open session.
        priority: the warmer's order (lower first).

    Returns:
        The view's body.
    """
    warmer: ViewWarmer | None = getattr(app.state, "view_warmer", None)
    if warmer is not None:
        warmer.served(name, lambda: _build_view(app, name, render), priority=priority)
    return _build_view(app, name, render)


def _build_view(app: Any, name: Hashable, render: Callable[[Session], bytes]) -> bytes:
    settings = app.state.settings
    with app.state.sessions() as session:
        version = crud.board_version(session)
        key = (settings.db_url, version, _threshold_key(settings), name)
        return _cache.get(key, lambda: render(session))


@contextmanager
def warm_views(app: Any) -> Iterator[None]:
    """Rebuild the app's recently served public views whenever the board changes (a lifespan
    service of ``pflkit.app``: one polling thread per API process)."""

    def read_version() -> int:
        with app.state.sessions() as session:
            return crud.board_version(session)

    app.state.view_warmer = ViewWarmer(read_version)
    with app.state.view_warmer.running():
        yield


def serves_canaries(app: Any) -> bool:
    """Whether the benchmark the app serves holds the audit's canaries."""
    return canaries_present(getattr(app.state.settings, "data_dir", None))
