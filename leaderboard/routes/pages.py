"""The public pages: the leaderboard, one submission's page, the tracks' plots, the stylesheet."""

from __future__ import annotations

import json

from fastapi import APIRouter, HTTPException, Query, Request, status
from fastapi.responses import HTMLResponse, Response
from sqlalchemy.orm import Session

from benchmark.tracks import TRACKS
from evaluator.api.deps import organiser_from_request
from evaluator.api.responses import DATABASE_UNAVAILABLE, NOT_MODIFIED, THROTTLED, Responses
from evaluator.core.config import Settings
from evaluator.readiness import track2_checks
from evaluator.validation.coverage import BYTES_CHECKED
from evaluator.validation.privacy import VERIFICATION_COVERS, VERIFICATION_DOES_NOT_COVER
from leaderboard import source, views
from leaderboard.responses import JSON_TYPE, PAGE_TYPE, PLOT_TYPE, respond
from leaderboard.routes.deps import SessionDep
from leaderboard.routes.templating import PACKAGE_DIR, templates

router = APIRouter(tags=["leaderboard"])
_STYLE = (PACKAGE_DIR / "static" / "style.css").read_bytes()
# Unranked submissions listed per table on the public page (the newest; the exports list all):
# with 10,000 submissions the full lists made the page 1.3 MB and its rendering the slowest
# step of a rebuild.
MAX_UNRANKED_SHOWN = 100
# Rounds of the per-round table an organiser sees on a detail page.
MAX_ROUNDS_SHOWN = 200
#: the participants' page on how a submission is scored (docs/participants/scoring.md), under
#: the documentation site (``Settings.docs_url``).
SCORING_PAGE = "participants/scoring/"
#: a submission page's 404: the public do not learn that a hidden submission exists
SUBMISSION_NOT_SHOWN: Responses = {
    404: {"description": "no such submission, or one the organisers hid: check the id"},
}


def scoring_url(settings: Settings) -> str | None:
    """The participants' scoring page, ``None`` where no documentation site answers."""
    link = settings.docs_link
    return None if link is None else link + SCORING_PAGE


@router.get("/leaderboard/static/style.css", include_in_schema=False)
def style() -> Response:
    """The pages' only stylesheet."""
    return Response(_STYLE, media_type="text/css", headers={"Cache-Control": "max-age=3600"})


@router.get(
    "/leaderboard",
    response_class=HTMLResponse,
    responses={**NOT_MODIFIED, **DATABASE_UNAVAILABLE},
)
async def leaderboard_page(request: Request, all: bool = Query(False, alias="all")) -> Response:
    """Every track: ranked tables, plots and the unranked submissions with reasons (``ETag``
    and gzip: ``leaderboard.responses``)."""

    def render(session: Session) -> bytes:
        context = {
            "board": views.board(request.app, session, all_submissions=all, public=True),
            "covers": VERIFICATION_COVERS,
            "does_not_cover": VERIFICATION_DOES_NOT_COVER,
            "bytes_checked": BYTES_CHECKED,
            "track2_checks": track2_checks(views.serves_canaries(request.app)),
            "unranked_shown": MAX_UNRANKED_SHOWN,
            "scoring_url": scoring_url(request.app.state.settings),
        }
        return templates.get_template("leaderboard.html").render(context).encode()

    view = await views.served_view(request.app, ("leaderboard.html", all), render, priority=0)
    return respond(request, view, media_type=PAGE_TYPE)


# 429 only for a request that presents a credential (an organiser's, to see more) while its
# address is throttled; without one the page is public.
@router.get(
    "/leaderboard/submissions/{submission_id}",
    response_class=HTMLResponse,
    responses={**THROTTLED, **SUBMISSION_NOT_SHOWN, **DATABASE_UNAVAILABLE},
)
def submission_page(request: Request, submission_id: str, session: SessionDep) -> HTMLResponse:
    """One submission. Everyone sees a summary (scores to 4 decimals, totals, the claim and
    whether it was verified); organisers also see reasons, per-round tallies, the full privacy
    report and the history's details."""
    organiser = organiser_from_request(request, session)
    row = source.load_submission(session, submission_id=submission_id)
    if row is None or (row.hidden and organiser is None):
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such submission")
    context = {
        "s": row,
        "track": TRACKS.get(row.track),
        "figures": row.figures,
        "public": organiser is None,
        "rounds_shown": (row.per_round or [])[:MAX_ROUNDS_SHOWN],
        "covers": VERIFICATION_COVERS,
        "does_not_cover": VERIFICATION_DOES_NOT_COVER,
        "bytes_checked": BYTES_CHECKED,
    }
    return templates.TemplateResponse(request, "submission.html", context)


def _plotted_track(track: int) -> int:
    """``track`` when it is a track with a plot; else the HTTP error that says why not."""
    if track not in TRACKS:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT, f"track must be one of {sorted(TRACKS)}"
        )
    if TRACKS[track].plot is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"track {track} has no plot")
    return track


@router.get("/leaderboard/plots/track{track}.png", include_in_schema=False)
async def plot(request: Request, track: int) -> Response:
    """The plot a track names (``Track.plot``, ``leaderboard.plots.PLOTS``): track 1, ANLS
    against bytes (log) with the threshold; track 2, ANLS against epsilon; track 3,
    personalised against global ANLS per client."""
    track = _plotted_track(track)
    view = await views.served_view(
        request.app, ("plot", track), lambda session: views.plot(request.app, session, track).png
    )
    return respond(request, view, media_type=PLOT_TYPE)


@router.get("/leaderboard/plots/track{track}.json", include_in_schema=False)
async def plot_map(request: Request, track: int) -> Response:
    """What a track's plot drew (``leaderboard.plot_canvas.DrawnPlot``): the axes' box, each
    submission's point and each line, in the image's pixels, and the legend's entries."""
    track = _plotted_track(track)

    def render(session: Session) -> bytes:
        return json.dumps(views.plot(request.app, session, track).as_dict()).encode()

    view = await views.served_view(request.app, ("plot map", track), render)
    return respond(request, view, media_type=JSON_TYPE)
