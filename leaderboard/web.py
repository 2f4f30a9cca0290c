"""The leaderboard's routes, mounted on the evaluator's FastAPI app by ``pflkit.app``.

Pages: ``GET /leaderboard`` (every track; ``?all=true`` for every submission),
``GET /leaderboard/submissions/{id}`` (communication per round, privacy report, track 3's
figures), ``GET /leaderboard/plots/track{1,2,3}.png``, ``GET /leaderboard/organiser``
(every submission with status and reason; re-score, hide, disqualify). Exports:
``GET /api/v1/leaderboard?track=N`` (JSON) and ``GET /api/v1/leaderboard.csv``.
Organiser actions: ``POST /api/v1/leaderboard/submissions/{id}/{action}`` with the organiser's
bearer token, or the organiser page's forms (an opaque, expiring session id in a Secure,
HTTP-only, strict same-site cookie). Authentication is ``evaluator.api.deps``'s; every write goes
through ``evaluator.crud`` (flags, re-score, sessions).
"""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path as FilePath
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, HTTPException, Path, Query, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from sqlalchemy.orm import Session

from benchmark.tracks import TRACKS
from evaluator import crud
from evaluator.api.deps import (
    SESSION_COOKIE,
    check_throttle,
    get_session,
    organiser_from_request,
    record_failure,
    require_organiser,
)
from evaluator.models import Submission, Team
from evaluator.validation.privacy import VERIFICATION_COVERS, VERIFICATION_DOES_NOT_COVER
from leaderboard import formatting, plots, source
from leaderboard.board import Board, as_json, build_board, csv_text
from leaderboard.threshold import track1_threshold

PACKAGE_DIR = FilePath(__file__).resolve().parent
TRACK_CHOICES = " or ".join(f"{number} ({track.name})" for number, track in sorted(TRACKS.items()))
ACTIONS = ("hide", "unhide", "disqualify", "requalify", "rescore")

router = APIRouter(tags=["leaderboard"])
templates = Jinja2Templates(directory=str(PACKAGE_DIR / "templates"))
templates.env.filters.update(
    bytes=formatting.human_bytes, score=formatting.score, when=formatting.when
)
_STYLE = (PACKAGE_DIR / "static" / "style.css").read_bytes()
_plot_cache: dict[tuple[Any, ...], bytes] = {}
_plot_lock = threading.Lock()

SessionDep = Annotated[Session, Depends(get_session)]


def _board(request: Request, session: Session, *, all_submissions: bool, public: bool) -> Board:
    """Rank the database's submissions with the app's threshold."""
    settings = request.app.state.settings
    threshold, origin = track1_threshold(getattr(settings, "data_dir", None))
    return build_board(
        source.load_rows(session),
        threshold=threshold,
        threshold_source=origin,
        all_submissions=all_submissions,
        public=public,
    )


OrganiserDep = Annotated[Team, Depends(require_organiser)]
# Rounds of the per-round table an organiser sees on a detail page.
MAX_ROUNDS_SHOWN = 200


@router.get("/leaderboard/static/style.css", include_in_schema=False)
def style() -> Response:
    """The pages' only stylesheet."""
    return Response(_STYLE, media_type="text/css", headers={"Cache-Control": "max-age=3600"})


@router.get("/leaderboard", response_class=HTMLResponse)
def leaderboard_page(
    request: Request, session: SessionDep, all: bool = Query(False, alias="all")
) -> HTMLResponse:
    """Every track: ranked tables, plots and the unranked submissions with reasons."""
    board = _board(request, session, all_submissions=all, public=True)
    context = {
        "board": board,
        "covers": VERIFICATION_COVERS,
        "does_not_cover": VERIFICATION_DOES_NOT_COVER,
    }
    return templates.TemplateResponse(request, "leaderboard.html", context)


@router.get("/leaderboard/submissions/{submission_id}", response_class=HTMLResponse)
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
        "public": organiser is None,
        "rounds_shown": (row.per_round or [])[:MAX_ROUNDS_SHOWN],
        "covers": VERIFICATION_COVERS,
        "does_not_cover": VERIFICATION_DOES_NOT_COVER,
    }
    return templates.TemplateResponse(request, "submission.html", context)


def _plot(request: Request, session: Session, track: int) -> bytes:
    """The track's plot, rendered again only when a submission or the threshold changed."""
    settings = request.app.state.settings
    threshold, _ = track1_threshold(getattr(settings, "data_dir", None))
    key = (str(settings.db_url), track, threshold, source.fingerprint(session))
    with _plot_lock:
        if key in _plot_cache:
            return _plot_cache[key]
    board = _board(request, session, all_submissions=True, public=True)
    image = plots.track_png(board.tracks[track])
    with _plot_lock:
        _plot_cache.clear() if len(_plot_cache) > 16 else None
        _plot_cache[key] = image
    return image


@router.get("/leaderboard/plots/track{track}.png", include_in_schema=False)
def plot(
    request: Request,
    track: Annotated[int, Path(ge=min(TRACKS), le=max(TRACKS))],
    session: SessionDep,
) -> Response:
    """Track 1: ANLS against bytes (log) with the threshold; track 2: ANLS against epsilon;
    track 3: personalised against global ANLS per client."""
    return Response(
        _plot(request, session, track),
        media_type="image/png",
        headers={"Cache-Control": "no-cache"},
    )


@router.get("/api/v1/leaderboard")
def leaderboard_json(
    request: Request,
    session: SessionDep,
    track: int = Query(..., ge=min(TRACKS), le=max(TRACKS), description=TRACK_CHOICES),
    all: bool = Query(False, description="every submission, not only each team's best"),
) -> dict[str, Any]:
    """One track's ranking as JSON."""
    board = _board(request, session, all_submissions=all, public=True)
    return as_json(board, track=track)


@router.get("/api/v1/leaderboard.csv")
def leaderboard_csv(
    request: Request,
    session: SessionDep,
    track: int | None = Query(None, ge=min(TRACKS), le=max(TRACKS), description="one track only"),
    all: bool = Query(False, description="every submission, not only each team's best"),
) -> Response:
    """Every track (or one) as CSV, one line per table entry (pandas)."""
    board = _board(request, session, all_submissions=all, public=True)
    return Response(
        csv_text(board, track=track),
        media_type="text/csv",
        headers={"Content-Disposition": 'attachment; filename="leaderboard.csv"'},
    )


def apply_action(
    session: Session,
    *,
    submission_id: str,
    action: str,
    organiser: Team,
    reason: str = "",
    queue: Any = None,
) -> None:
    """Hide, unhide, disqualify, requalify or re-score a submission, recording an event.

    Args:
        session: open session (committed here).
        submission_id: the submission.
        action: one of ``ACTIONS``.
        organiser: the acting organiser (named in the event).
        reason: why (required to disqualify).
        queue: the task queue (re-score only).

    Raises:
        HTTPException: 404 unknown submission, 400 unknown action or missing reason,
            409 re-scoring a submission that has not ended.
    """
    row = session.get(Submission, submission_id)
    if row is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such submission")
    if action not in ACTIONS:
        raise HTTPException(status.HTTP_400_BAD_REQUEST, f"action must be one of {ACTIONS}")
    reason = reason.strip()
    if action == "rescore":
        if not crud.request_rescore(
            session, submission_id=submission_id, current_status=row.status,
            requested_by=organiser.name,
        ):
            raise HTTPException(
                status.HTTP_409_CONFLICT, f"submission is {row.status}; wait for it to end"
            )
        session.commit()
        queue.enqueue(submission_id)
        return
    if action == "disqualify" and not reason:
        raise HTTPException(status.HTTP_400_BAD_REQUEST, "give the reason for disqualifying")
    crud.set_flags(
        session, submission_id=submission_id, organiser=organiser.name, action=action, reason=reason
    )
    session.commit()


@router.post("/api/v1/leaderboard/submissions/{submission_id}/{action}")
def organiser_action(
    request: Request,
    submission_id: str,
    action: str,
    organiser: OrganiserDep,
    session: SessionDep,
    reason: str = Query("", max_length=2000),
) -> dict[str, Any]:
    """Organisers: hide, unhide, disqualify (``?reason=``), requalify or re-score."""
    apply_action(
        session,
        submission_id=submission_id,
        action=action,
        organiser=organiser,
        reason=reason,
        queue=request.app.state.queue,
    )
    row = session.get(Submission, submission_id)
    session.refresh(row)
    return {
        "id": row.id,
        "status": row.status,
        "hidden": row.hidden,
        "disqualified_reason": row.disqualified_reason,
    }


@router.get("/api/v1/leaderboard/organiser")
def organiser_json(
    request: Request, organiser: OrganiserDep, session: SessionDep
) -> dict[str, Any]:
    """Organisers: every submission with its state, flags and the reason it is (un)ranked."""
    board = _board(request, session, all_submissions=True, public=False)
    return {"submissions": _organiser_rows(session, board)}


def _organiser_rows(session: Session, board: Board) -> list[dict[str, Any]]:
    """Every submission, newest first, with the leaderboard's verdict on it."""
    verdict: dict[str, str] = {}
    for number, result in board.tracks.items():
        for budget, table in result.tables.items():
            at = "" if budget is None else f" at epsilon <= {budget:g}"
            for e in table.ranked:
                verdict.setdefault(e.row.id, f"track {number} rank {e.rank}{at}")
    for result in board.tracks.values():
        for u in result.unranked:
            verdict.setdefault(u.row.id, u.reason)
    out = []
    for row in reversed(source.load_rows(session)):
        out.append(
            {
                **row.as_dict(),
                "reason": row.reason,
                "hidden": row.hidden,
                "disqualified_reason": row.disqualified_reason,
                "leaderboard": verdict.get(row.id, "not ranked (best of team shown instead)"),
            }
        )
    return out


@router.get("/leaderboard/organiser", response_class=HTMLResponse)
def organiser_page(request: Request, session: SessionDep) -> HTMLResponse:
    """Organisers: every submission with status and reason, and the actions (sign-in form)."""
    organiser = organiser_from_request(request, session)
    if organiser is None:
        return templates.TemplateResponse(
            request, "organiser_login.html", {}, status_code=status.HTTP_401_UNAUTHORIZED
        )
    board = _board(request, session, all_submissions=True, public=False)
    return templates.TemplateResponse(
        request,
        "organiser.html",
        {"organiser": organiser, "rows": _organiser_rows(session, board), "board": board},
    )


@router.post("/leaderboard/organiser/login", include_in_schema=False)
def organiser_login(
    request: Request, session: SessionDep, token: Annotated[str, Form(max_length=200)]
) -> Response:
    """Check an organiser token and open a session: the cookie holds an opaque, expiring id
    (HTTP-only, Secure, strict same-site), never the token."""
    check_throttle(request)
    team = crud.team_by_token(session, token=token.strip())
    if team is None or not team.is_organiser:
        record_failure(request)
        raise HTTPException(status.HTTP_403_FORBIDDEN, "not an organiser token")
    settings = request.app.state.settings
    lifetime = dt.timedelta(hours=settings.session_hours)
    session_id = crud.create_organiser_session(session, team_id=team.id, lifetime=lifetime)
    session.commit()
    response = RedirectResponse("/leaderboard/organiser", status_code=status.HTTP_303_SEE_OTHER)
    response.set_cookie(
        SESSION_COOKIE,
        session_id,
        max_age=int(lifetime.total_seconds()),
        httponly=True,
        secure=settings.session_cookie_secure,
        samesite="strict",
        path="/",
    )
    return response


@router.post("/leaderboard/organiser/logout", include_in_schema=False)
def organiser_logout(request: Request, session: SessionDep) -> Response:
    """End the organiser's session and forget the cookie."""
    session_id = request.cookies.get(SESSION_COOKIE)
    if session_id:
        crud.end_organiser_session(session, session_id=session_id)
        session.commit()
    response = RedirectResponse("/leaderboard", status_code=status.HTTP_303_SEE_OTHER)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


@router.post("/leaderboard/organiser/submissions/{submission_id}/{action}", include_in_schema=False)
def organiser_form_action(
    request: Request,
    submission_id: str,
    action: str,
    organiser: OrganiserDep,
    session: SessionDep,
    reason: Annotated[str, Form(max_length=2000)] = "",
) -> Response:
    """The organiser page's buttons (same action as the JSON endpoint), back to the page."""
    apply_action(
        session,
        submission_id=submission_id,
        action=action,
        organiser=organiser,
        reason=reason,
        queue=request.app.state.queue,
    )
    return RedirectResponse("/leaderboard/organiser", status_code=status.HTTP_303_SEE_OTHER)
