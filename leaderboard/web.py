"""The leaderboard's router, mounted on the evaluator's FastAPI app by ``pflkit.app``.

Pages (``leaderboard.routes.pages``): ``GET /leaderboard`` (every track; ``?all=true`` for every
submission), ``GET /leaderboard/submissions/{id}`` (communication per round, privacy report,
track 3's figures), ``GET /leaderboard/plots/track{1,2,3}.png``. Exports
(``leaderboard.routes.exports``): ``GET /api/v1/leaderboard?track=N`` (JSON) and
``GET /api/v1/leaderboard.csv``. Organisers (``leaderboard.routes.organiser``):
``GET /leaderboard/organiser`` (every submission with status and reason; re-score, hide,
disqualify) and ``POST /api/v1/leaderboard/submissions/{id}/{action}`` with the organiser's
bearer token, or the organiser page's forms, signed in by ``leaderboard.routes.login`` (an
opaque, expiring session id in a Secure, HTTP-only, strict same-site cookie). Authentication is
``evaluator.api.deps``'s; every write goes through ``evaluator.crud`` (flags, re-score,
sessions).

The public views (page, plots, exports) are cached per board version (``leaderboard.views``),
each with its gzipped body and ETag (``leaderboard.responses``: a poller that sends the ETag back
gets a 304 while the view is unchanged); ``warm_views`` rebuilds them as soon as the board
changes, and ``pflkit.app`` answers a cached one before FastAPI's routing
(``leaderboard.fast_reads``).
"""

from __future__ import annotations

from fastapi import APIRouter

from leaderboard.routes import exports, login, organiser, pages
from leaderboard.views import warm_views

router = APIRouter()
router.include_router(pages.router)
router.include_router(exports.router)
router.include_router(organiser.router)
router.include_router(login.router)

__all__ = ["router", "warm_views"]
