"""The exports: one track's ranking as JSON, every track (or one) as CSV."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy.orm import Session

from benchmark.tracks import TRACKS
from evaluator.api.responses import DATABASE_UNAVAILABLE, NOT_MODIFIED
from leaderboard import views
from leaderboard.board import as_json, csv_text
from leaderboard.responses import CSV_HEADERS, CSV_TYPE, JSON_TYPE, respond

router = APIRouter(tags=["leaderboard"])
TRACK_CHOICES = " or ".join(f"{number} ({track.name})" for number, track in sorted(TRACKS.items()))


def _known(track: int | None) -> None:
    """Refuse a track the benchmark lacks (read from ``TRACKS`` per request: a track added
    after start-up counts).

    Raises:
        RequestValidationError: FastAPI's 422 for the ``track`` query parameter, the body its
            OpenAPI schema declares (``HTTPValidationError``), naming the tracks.
    """
    if track is not None and track not in TRACKS:
        raise RequestValidationError(
            [
                {
                    "type": "enum",
                    "loc": ("query", "track"),
                    "msg": f"track must be one of {sorted(TRACKS)}",
                    "input": track,
                }
            ]
        )


@router.get("/api/v1/leaderboard", responses={**NOT_MODIFIED, **DATABASE_UNAVAILABLE})
async def leaderboard_json(
    request: Request,
    track: int = Query(..., description=TRACK_CHOICES),
    all: bool = Query(False, description="every submission, not only each team's best"),
) -> Response:
    """One track's ranking as JSON (``ETag``: send it back in ``If-None-Match`` to get a 304
    while the ranking is unchanged; gzipped for clients that accept it)."""
    _known(track)

    def render(session: Session) -> bytes:
        board = views.board(request.app, session, all_submissions=all, public=True)
        return JSONResponse(jsonable_encoder(as_json(board, track=track))).body

    view = await views.served_view(request.app, ("json", track, all), render)
    return respond(request, view, media_type=JSON_TYPE)


@router.get("/api/v1/leaderboard.csv", responses={**NOT_MODIFIED, **DATABASE_UNAVAILABLE})
async def leaderboard_csv(
    request: Request,
    track: int | None = Query(None, description="one track only"),
    all: bool = Query(False, description="every submission, not only each team's best"),
) -> Response:
    """Every track (or one) as CSV, one line per table entry (pandas; ``ETag`` and gzip as the
    JSON's)."""
    _known(track)

    def render(session: Session) -> bytes:
        board = views.board(request.app, session, all_submissions=all, public=True)
        return csv_text(board, track=track).encode()

    view = await views.served_view(request.app, ("csv", track, all), render)
    return respond(request, view, media_type=CSV_TYPE, headers=CSV_HEADERS)
