"""The exports: one track's ranking as JSON, every track (or one) as CSV."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Query, Request, status
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse, Response
from sqlalchemy.orm import Session

from benchmark.tracks import TRACKS
from leaderboard import views
from leaderboard.board import as_json, csv_text

router = APIRouter(tags=["leaderboard"])
TRACK_CHOICES = " or ".join(f"{number} ({track.name})" for number, track in sorted(TRACKS.items()))


def _known(track: int | None) -> None:
    """Refuse a track the benchmark lacks (read from ``TRACKS`` per request: a track added
    after start-up counts).

    Raises:
        HTTPException: 422 naming the tracks.
    """
    if track is not None and track not in TRACKS:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT, f"track must be one of {sorted(TRACKS)}"
        )


@router.get("/api/v1/leaderboard")
def leaderboard_json(
    request: Request,
    track: int = Query(..., description=TRACK_CHOICES),
    all: bool = Query(False, description="every submission, not only each team's best"),
) -> Response:
    """One track's ranking as JSON."""
    _known(track)

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
    track: int | None = Query(None, description="one track only"),
    all: bool = Query(False, description="every submission, not only each team's best"),
) -> Response:
    """Every track (or one) as CSV, one line per table entry (pandas)."""
    _known(track)

    def render(session: Session) -> bytes:
        board = views.board(request.app, session, all_submissions=all, public=True)
        return csv_text(board, track=track).encode()

    return Response(
        views.cached_view(request.app, ("csv", track, all), render),
        media_type="text/csv",
        headers={"Content-Disposition": 'attachment; filename="leaderboard.csv"'},
    )
