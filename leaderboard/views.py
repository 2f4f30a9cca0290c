"""The leaderboard's public views, cached per board version (``leaderboard.cache``).

While nothing changes a request costs no query of its own: the board version is read once for
all the requests that arrived meanwhile (``evaluator.core.shared_read``) and the view, with its
gzipped body and ETag (``leaderboard.responses``), comes from the cache in the event loop.
Rebuilt after a score lands or an organiser acts, from the rows kept since the last build and
the submissions changed since (``leaderboard.kept_rows``), in one worker thread with one short
session. ``warm_views`` (a lifespan service of ``pflkit.app``) rebuilds the views readers asked
for as soon as the board changes.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from benchmark.info import benchmark_json_files
from benchmark.threshold import thresholds_in_force
from benchmark.tracks import thresholded_tracks
from evaluator import crud
from evaluator.core.shared_read import SharedRead
from evaluator.readiness import canaries_present
from leaderboard.board import Board, build_board
from leaderboard.cache import VersionedCache
from leaderboard.kept_rows import kept_rows
from leaderboard.plot_canvas import DrawnPlot
from leaderboard.plots import track_plot
from leaderboard.responses import View
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


def plot(app: Any, session: Session, track: int) -> DrawnPlot:
    """A track's plot of every submission, drawn once per board version for both its image
    and the map of what it drew (``/leaderboard/plots/track{n}.png`` and ``.json``).

    Args:
        app: the FastAPI app.
        session: an open session.
        track: a track number with a plot.

    Returns:
        The drawn plot.
    """
    settings = app.state.settings
    version = crud.board_version(session)
    key = (settings.db_url, version, _threshold_key(settings), "drawn plot", track)

    def draw() -> DrawnPlot:
        return track_plot(board(app, session, all_submissions=True, public=True).tracks[track])

    return _cache.get(key, draw)


async def served_view(
    app: Any, name: Hashable, render: Callable[[Session], bytes], *, priority: int = 1
) -> View:
    """A public view from the cache, in the event loop when it is built for the current version.

    The board version comes from the app's shared read (``evaluator.core.shared_read``: one
    query for every request that arrived meanwhile, each request's read starting after it
    arrived), so a cached view costs no worker thread, no session and no query of its own. A
    view not built yet for that version is built in a worker thread with one short session, one
    build for all the requests that miss it. The app's ``ViewWarmer`` is told that the view was
    asked for, so that it builds the view again as soon as the board changes (``priority`` 0:
    before the others).

    Args:
        app: the FastAPI app.
        name: the view's key (with the board version and the threshold).
        render: builds the body from an open session.
        priority: the warmer's order (lower first).

    Returns:
        The view (body, gzipped body, ETag).
    """
    _note_served(app, name, render, priority)
    version = await _versions(app).get(None)
    key = _key(app.state.settings, version, name)
    hit = _cache.peek(key)
    if hit is not None:
        return hit
    # The requests that miss the same key wait for one build, which holds one worker thread
    # (not one each: a hundred readers after a score would hold the whole pool, waiting).
    builds: dict[Hashable, asyncio.Future[View]] | None = getattr(app.state, "view_builds", None)
    if builds is None:
        builds = app.state.view_builds = {}
    build = builds.get(key)
    if build is None:
        build = builds[key] = asyncio.ensure_future(
            run_in_threadpool(_build_view, app, name, render)
        )
        build.add_done_callback(lambda _: builds.pop(key, None))
    return await asyncio.shield(build)


async def cached_only(app: Any, name: Hashable) -> View | None:
    """The view ``name`` when it is built for the current board version, else None (never
    builds; for ``leaderboard.fast_reads``). The warmer's note that it was asked for is kept
    fresh; a view the warmer does not know is None too (its route registers it)."""
    warmer: ViewWarmer | None = getattr(app.state, "view_warmer", None)
    if warmer is not None and not warmer.touch(name):
        return None
    version = await _versions(app).get(None)
    return _cache.peek(_key(app.state.settings, version, name))


def _note_served(
    app: Any, name: Hashable, render: Callable[[Session], bytes], priority: int
) -> None:
    warmer: ViewWarmer | None = getattr(app.state, "view_warmer", None)
    if warmer is not None:
        warmer.served(name, lambda: _build_view(app, name, render), priority=priority)


def _key(settings: Any, version: int, name: Hashable) -> tuple[Any, ...]:
    return (settings.db_url, version, _threshold_key(settings), name)


def _build_view(app: Any, name: Hashable, render: Callable[[Session], bytes]) -> View:
    with app.state.sessions() as session:
        key = _key(app.state.settings, crud.board_version(session), name)
        return _cache.get(key, lambda: View.of(render(session)))


def _versions(app: Any) -> SharedRead[None, int]:
    """The app's shared read of the board version (made on first use; its one key is None)."""
    shared: SharedRead[None, int] | None = getattr(app.state, "board_versions", None)
    if shared is None:

        def read_version(_keys: frozenset[None]) -> dict[None, int]:
            with app.state.read_sessions() as session:
                version = crud.board_version(session)
            warmer: ViewWarmer | None = getattr(app.state, "view_warmer", None)
            if warmer is not None:
                warmer.saw(version)  # a reader saw the board move: rebuild now, not at the poll
            return {None: version}

        shared = app.state.board_versions = SharedRead(read_version)
    return shared


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
