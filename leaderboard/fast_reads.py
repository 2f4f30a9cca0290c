"""The public views' fast answers (``evaluator.api.fast_reads``): the page, the JSON and CSV
exports and the plots, from the cache, before FastAPI's routing.

Each handler reads its route's parameters the way the route does, looks the view up for the
current board version (``leaderboard.views.cached_only``: the version from the shared read, no
query of its own) and answers as the route would (``leaderboard.responses.answer``: 304, gzip,
ETag). A view not built yet, or a query the handler does not read as plainly as the route
(a repeated or malformed parameter, an unknown track), is left to the route.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any
from urllib.parse import parse_qsl

from benchmark.tracks import TRACKS
from evaluator.api.fast_reads import Answer, FastReads, header
from leaderboard import views
from leaderboard.responses import (
    CSV_HEADERS,
    CSV_TYPE,
    JSON_TYPE,
    PAGE_TYPE,
    PLOT_TYPE,
    answer,
)

_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def add_fast_reads(app: Any) -> None:
    """Claim the public views' paths on the app's ``fast_reads`` (``pflkit.app``)."""
    fast: FastReads = app.state.fast_reads
    fast.add("/leaderboard", _page)
    fast.add("/api/v1/leaderboard", _json)
    fast.add("/api/v1/leaderboard.csv", _csv)
    for number, track in TRACKS.items():
        if track.plot is not None:
            fast.add(f"/leaderboard/plots/track{number}.png", _plot,
                     route="/leaderboard/plots/track{track}.png")  # fmt: skip
            fast.add(f"/leaderboard/plots/track{number}.json", _plot_map,
                     route="/leaderboard/plots/track{track}.json")  # fmt: skip


def _query(scope: dict[str, Any]) -> dict[str, str] | None:
    """The query's parameters (as Starlette splits them); None when one repeats."""
    pairs = parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True)
    found = dict(pairs)
    return found if len(found) == len(pairs) else None


def _flag(query: Mapping[str, str], name: str) -> bool | None:
    """A boolean parameter (absent: False); None when it is not plainly true or false."""
    value = query.get(name, "false").lower()
    return True if value in _TRUE else False if value in _FALSE else None


def _track(query: Mapping[str, str]) -> int | None:
    """The ``track`` parameter when it is a plain number of a known track, else None."""
    value = query.get("track", "")
    if not (value.isascii() and value.isdigit()) or int(value) not in TRACKS:
        return None
    return int(value)


async def _cached(
    app: Any, scope: dict[str, Any], name: Hashable, media_type: str,
    headers: Mapping[str, str] | None = None,
) -> Answer | None:  # fmt: skip
    view = await views.cached_only(app, name)
    if view is None:
        return None
    code, body, fields = answer(
        view, media_type=media_type, accept_encoding=header(scope, b"accept-encoding"),
        if_none_match=header(scope, b"if-none-match"), headers=headers,
    )  # fmt: skip
    return code, [(k.encode("latin-1"), v.encode("latin-1")) for k, v in fields.items()], body


async def _page(app: Any, scope: dict[str, Any], _: str | None) -> Answer | None:
    query = _query(scope)
    every = None if query is None else _flag(query, "all")
    if every is None:
        return None
    return await _cached(app, scope, ("leaderboard.html", every), PAGE_TYPE)


async def _json(app: Any, scope: dict[str, Any], _: str | None) -> Answer | None:
    query = _query(scope)
    if query is None:
        return None
    track, every = _track(query), _flag(query, "all")
    if track is None or every is None:
        return None
    return await _cached(app, scope, ("json", track, every), JSON_TYPE)


async def _csv(app: Any, scope: dict[str, Any], _: str | None) -> Answer | None:
    query = _query(scope)
    if query is None:
        return None
    track = _track(query) if "track" in query else None
    every = _flag(query, "all")
    if ("track" in query and track is None) or every is None:
        return None
    return await _cached(app, scope, ("csv", track, every), CSV_TYPE, CSV_HEADERS)


async def _plot(app: Any, scope: dict[str, Any], _: str | None) -> Answer | None:
    number = int(scope["path"].removeprefix("/leaderboard/plots/track").removesuffix(".png"))
    return await _cached(app, scope, ("plot", number), PLOT_TYPE)


async def _plot_map(app: Any, scope: dict[str, Any], _: str | None) -> Answer | None:
    number = int(scope["path"].removeprefix("/leaderboard/plots/track").removesuffix(".json"))
    return await _cached(app, scope, ("plot map", number), JSON_TYPE)
