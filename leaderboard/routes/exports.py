"""The exports: one track's ranking as JSON, every track (or one) as CSV."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse, Response
from sqlalchemy.orm import Session

from benchmark.tracks import TRACKS
from leaderboard import views
from leaderboard.board import as_json, csv_text

router = APIRouter(tags=["leaderboard"])
TRACK_CHOICES = " or ".join(f"{number} ({track.name})" for number, track in sorted(TRACKS.items()))


@router.get("/api/v1/leaderboard")
def leaderboard_json(
    request: Request,
    track: int = Query(..., ge=min(TRACKS), le=max(TRACKS), description=TRACK_CHOICES),
    all: bool = Query(False, description="every submission, not only each team's best"),
) -> Response:
    """One track's ranking as JSON."""

    def render(session: Session) -> bytes:
        board = views.board(request.app, session, all_submissions=all, public=True)
        return JSONResponse(jsonable_encoder(as_json(board, track=track))).body

    return Response(
        views.cached_view(request.app, ("json", track, all), render),
        media_type="application/json",
    )


@router.get("/api/v1/leaderboard.csv")
def leaderboard_csv(
    request: Request,
    track: int | None = Query(None, ge=min(TRACKS), le=max(TRACKS), description="one track only"),
    all: bool = Query(False, description="every submission, not only each team's best"),
) -> Response:
    """Every track (or one) as CSV, one line per table entry (pandas)."""

    def render(session: Session) -> bytes:
        board = views.board(request.app, session, all_submissions=all, public=True)
        return csv_text(board, track=track).encode()

    return Response(
        views.cached_view(request.app, ("csv", track, all), render),
        media_type="text/csv",
        headers={"Content-Disposition": 'attachment; filename="leaderboard.csv"'},
    )
