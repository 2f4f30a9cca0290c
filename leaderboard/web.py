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

The public views (page, plots, exports) are cached per board version (``leaderboard.cache``):
one cheap query per request while nothing changes, rebuilt after a score lands or an
organiser acts, from the rows kept since the last build and the submissions changed since
(``leaderboard.kept_rows``). They take no session dependency: one worker thread and one short
session each.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path as FilePath
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, HTTPException, Path, Query, Request, status
from fastapi.encoders import jsonable_encoder
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from sqlalchemy.orm import Session

from benchmark.info import benchmark_json_files
from benchmark.threshold import THRESHOLD_ENV, track1_threshold
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
from evaluator.api.rescore import queue_rescore
from evaluator.models import Submission, Team
from evaluator.readiness import canaries_present, read_readiness, threshold_problem, track2_checks
from evaluator.validation.coverage import BYTES_CHECKED
from evaluator.validation.privacy import VERIFICATION_COVERS, VERIFICATION_DOES_NOT_COVER
from leaderboard import formatting, plots, source
from leaderboard.board import Board, as_json, build_board, csv_text
from leaderboard.cache import VersionedCache
from leaderboard.kept_rows import kept_rows
from leaderboard.warmer import ViewWarmer

PACKAGE_DIR = FilePath(__file__).resolve().parent
TRACK_CHOICES = " or ".join(f"{number} ({track.name})" for number, track in sorted(TRACKS.items()))
ACTIONS = ("hide", "unhide", "disqualify", "requalify", "rescore")

router = APIRouter(tags=["leaderboard"])
templates = Jinja2Templates(directory=str(PACKAGE_DIR / "templates"))
templates.env.filters.update(
    bytes=formatting.human_bytes, score=formatting.score, when=formatting.when
)
_STYLE = (PACKAGE_DIR / "static" / "style.css").read_bytes()
_cache = VersionedCache()

SessionDep = Annotated[Session, Depends(get_session)]


def _threshold(settings: Any) -> tuple[float, str]:
    """The track-1 threshold, read again only when its file or variable changed."""
    data_dir = getattr(settings, "data_dir", None)
    stamp: list[Any] = [os.environ.get(THRESHOLD_ENV)]
    if data_dir is not None:
        stamp.extend(
            (str(path), path.stat().st_mtime_ns) for path in benchmark_json_files(data_dir)
        )
    return _threshold_at(data_dir, tuple(stamp))


@lru_cache(maxsize=8)
def _threshold_at(data_dir: Any, _stamp: tuple[Any, ...]) -> tuple[float, str]:
    return track1_threshold(data_dir)


def _board(app: Any, session: Session, *, all_submissions: bool, public: bool) -> Board:
    """Rank the database's submissions with the app's threshold (cached per board version)."""
    settings = app.state.settings
    threshold, origin = _threshold(settings)

    def build() -> Board:
        return build_board(
            kept_rows(settings.db_url).read(session),
            threshold=threshold,
            threshold_source=origin,
            all_submissions=all_submissions,
            public=public,
        )

    version = crud.board_version(session)  # first: the rows read after it are no older
    key = (settings.db_url, version, threshold, "board", all_submissions, public)
    return _cache.get(key, build)


def _view(
    app: Any, name: Hashable, render: Callable[[Session], bytes], *, priority: int = 1
) -> bytes:
    """A public view's body from the cache, rendered with one short session when missing.

    The app's ``ViewWarmer`` (``pflkit serve``) is told that the view was asked for, so that it
    builds the view again as soon as the board changes (``priority`` 0: before the others).
    """
    warmer: ViewWarmer | None = getattr(app.state, "view_warmer", None)
    if warmer is not None:
        warmer.served(name, lambda: _build_view(app, name, render), priority=priority)
    return _build_view(app, name, render)


def _build_view(app: Any, name: Hashable, render: Callable[[Session], bytes]) -> bytes:
    settings = app.state.settings
    with app.state.sessions() as session:
        version = crud.board_version(session)
        key = (settings.db_url, version, _threshold(settings)[0], name)
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


OrganiserDep = Annotated[Team, Depends(require_organiser)]
# Unranked submissions listed per table on the public page (the newest; the exports list all):
# with 10,000 submissions the full lists made the page 1.3 MB and its rendering the slowest
# step of a rebuild.
MAX_UNRANKED_SHOWN = 100
# Rounds of the per-round table an organiser sees on a detail page.
MAX_ROUNDS_SHOWN = 200


@router.get("/leaderboard/static/style.css", include_in_schema=False)
def style() -> Response:
    """The pages' only stylesheet."""
    return Response(_STYLE, media_type="text/css", headers={"Cache-Control": "max-age=3600"})


@router.get("/leaderboard", response_class=HTMLResponse)
def leaderboard_page(request: Request, all: bool = Query(False, alias="all")) -> HTMLResponse:
    """Every track: ranked tables, plots and the unranked submissions with reasons."""

    def render(session: Session) -> bytes:
        context = {
            "board": _board(request.app, session, all_submissions=all, public=True),
            "covers": VERIFICATION_COVERS,
            "does_not_cover": VERIFICATION_DOES_NOT_COVER,
            "bytes_checked": BYTES_CHECKED,
            "track2_checks": track2_checks(_canaries(request.app)),
            "unranked_shown": MAX_UNRANKED_SHOWN,
        }
        return templates.get_template("leaderboard.html").render(context).encode()

    return HTMLResponse(_view(request.app, ("leaderboard.html", all), render, priority=0))


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
        "bytes_checked": BYTES_CHECKED,
    }
    return templates.TemplateResponse(request, "submission.html", context)


def _plot(session: Session, app: Any, track: int) -> bytes:
    """The track's plot (rendered once per board version)."""
    board = _board(app, session, all_submissions=True, public=True)
    return plots.track_png(board.tracks[track])


@router.get("/leaderboard/plots/track{track}.png", include_in_schema=False)
def plot(request: Request, track: Annotated[int, Path(ge=min(TRACKS), le=max(TRACKS))]) -> Response:
    """Track 1: ANLS against bytes (log) with the threshold; track 2: ANLS against epsilon;
    track 3: personalised against global ANLS per client."""
    return Response(
        _view(request.app, ("plot", track), lambda session: _plot(session, request.app, track)),
        media_type="image/png",
        headers={"Cache-Control": "no-cache"},
    )


@router.get("/api/v1/leaderboard")
def leaderboard_json(
    request: Request,
    track: int = Query(..., ge=min(TRACKS), le=max(TRACKS), description=TRACK_CHOICES),
    all: bool = Query(False, description="every submission, not only each team's best"),
) -> Response:
    """One track's ranking as JSON."""

    def render(session: Session) -> bytes:
        board = _board(request.app, session, all_submissions=all, public=True)
        return JSONResponse(jsonable_encoder(as_json(board, track=track))).body

    return Response(_view(request.app, ("json", track, all), render), media_type="application/json")


@router.get("/api/v1/leaderboard.csv")
def leaderboard_csv(
    request: Request,
    track: int | None = Query(None, ge=min(TRACKS), le=max(TRACKS), description="one track only"),
    all: bool = Query(False, description="every submission, not only each team's best"),
) -> Response:
    """Every track (or one) as CSV, one line per table entry (pandas)."""

    def render(session: Session) -> bytes:
        board = _board(request.app, session, all_submissions=all, public=True)
        return csv_text(board, track=track).encode()

    return Response(
        _view(request.app, ("csv", track, all), render),
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
        queue_rescore(session, queue, row, organiser.name)
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
    board = _board(request.app, session, all_submissions=True, public=False)
    return {"submissions": _organiser_rows(session, board),
            "service": _service_facts(request.app, board)}  # fmt: skip


def _canaries(app: Any) -> bool:
    """Whether the benchmark the app serves holds the audit's canaries."""
    return canaries_present(getattr(app.state.settings, "data_dir", None))


def _service_facts(app: Any, board: Board) -> dict[str, Any]:
    """What the organisers must know about the service's set-up (``evaluator.readiness``): the
    base model's test ANLS as the worker measured it at start-up, whether the threshold in force
    is above it, and whether the audit can run."""
    readiness = read_readiness(getattr(app.state.settings, "storage_dir", None))
    base = readiness.base_test_anls if readiness is not None else None
    canaries = _canaries(app)
    return {
        "base_test_anls": base,
        "base_scored_at": readiness.checked_at if readiness is not None else None,
        "threshold": board.threshold,
        "threshold_problem": threshold_problem(board.threshold, base),
        "canaries": canaries,
        "track2_checks": track2_checks(canaries),
    }


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
    board = _board(request.app, session, all_submissions=True, public=False)
    return templates.TemplateResponse(
        request,
        "organiser.html",
        {"organiser": organiser, "rows": _organiser_rows(session, board), "board": board,
         "service": _service_facts(request.app, board)},
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
