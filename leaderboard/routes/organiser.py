"""What only organisers see and do: every submission with its verdict, and the actions.

Actions (hide, unhide, disqualify, requalify, re-score) come as ``POST
/api/v1/leaderboard/submissions/{id}/{action}`` with the organiser's bearer token, or from the
organiser page's forms (the sign-in session of ``leaderboard.routes.login``); every write goes
through ``evaluator.crud``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Form, HTTPException, Query, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy.orm import Session

from benchmark.tracks import COMMUNICATION
from evaluator import crud
from evaluator.api.deps import organiser_from_request
from evaluator.api.rescore import queue_rescore
from evaluator.api.responses import (
    DATABASE_UNAVAILABLE,
    NOT_ENDED,
    ORGANISER_SESSION_AUTH,
    THROTTLED,
    Responses,
)
from evaluator.operations import Operations, operations_snapshot
from evaluator.readiness import read_readiness, threshold_problems, track2_checks
from evaluator.tables import Submission, Team
from leaderboard import source, views
from leaderboard.board import Board
from leaderboard.routes.deps import OrganiserDep, SessionDep
from leaderboard.routes.templating import templates

router = APIRouter(tags=["leaderboard"])
ACTIONS = ("hide", "unhide", "disqualify", "requalify", "rescore")
#: the answers of :func:`apply_action`'s refusals
BAD_ACTION: Responses = {
    400: {"description": f"the action is not one of {', '.join(ACTIONS)}, or `disqualify` came "
                         "without `?reason=`"},
}  # fmt: skip
UNKNOWN_SUBMISSION: Responses = {404: {"description": "no such submission: check the id"}}
#: the organiser page without organiser credentials answers its sign-in form
SIGN_IN_FORM: Responses = {
    401: {"description": "no organiser credentials: the page is the sign-in form instead"},
}


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


@router.post(
    "/api/v1/leaderboard/submissions/{submission_id}/{action}",
    responses={
        **ORGANISER_SESSION_AUTH,
        **BAD_ACTION,
        **UNKNOWN_SUBMISSION,
        **NOT_ENDED,
        **DATABASE_UNAVAILABLE,
    },
)
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


@router.get(
    "/api/v1/leaderboard/organiser", responses={**ORGANISER_SESSION_AUTH, **DATABASE_UNAVAILABLE}
)
def organiser_json(
    request: Request, organiser: OrganiserDep, session: SessionDep
) -> dict[str, Any]:
    """Organisers: every submission with its state, flags and the reason it is (un)ranked."""
    board = views.board(request.app, session, all_submissions=True, public=False)
    return {"submissions": _organiser_rows(session, board),
            "service": _service_facts(request.app, board),
            "operations": _operations(request.app, session).as_dict()}  # fmt: skip


def _operations(app: Any, session: Session) -> Operations:
    """The workers, the queue and the latest failures (``evaluator.operations``)."""
    return operations_snapshot(session, stale_seconds=app.state.settings.worker_stale_seconds)


def _service_facts(app: Any, board: Board) -> dict[str, Any]:
    """What the organisers must know about the service's set-up (``evaluator.readiness``): the
    base model's test ANLS as the worker measured it at start-up, whether the threshold in force
    is above it, and whether the audit can run."""
    readiness = read_readiness(getattr(app.state.settings, "storage_dir", None))
    base = readiness.base_test_anls if readiness is not None else None
    canaries = views.serves_canaries(app)
    return {
        "base_test_anls": base,
        "base_scored_at": readiness.checked_at if readiness is not None else None,
        "threshold": board.thresholds[COMMUNICATION.number][0],
        "thresholds": {str(number): value for number, (value, _) in board.thresholds.items()},
        "threshold_problem": next(iter(threshold_problems(board.thresholds, base)), None),
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


@router.get(
    "/leaderboard/organiser",
    response_class=HTMLResponse,
    responses={**SIGN_IN_FORM, **THROTTLED, **DATABASE_UNAVAILABLE},
)
def organiser_page(request: Request, session: SessionDep) -> HTMLResponse:
    """Organisers: every submission with status and reason, and the actions (sign-in form)."""
    organiser = organiser_from_request(request, session)
    if organiser is None:
        return templates.TemplateResponse(
            request, "organiser_login.html", {}, status_code=status.HTTP_401_UNAUTHORIZED
        )
    board = views.board(request.app, session, all_submissions=True, public=False)
    return templates.TemplateResponse(
        request,
        "organiser.html",
        {
            "organiser": organiser,
            "rows": _organiser_rows(session, board),
            "board": board,
            "service": _service_facts(request.app, board),
            "operations": _operations(request.app, session),
        },
    )


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
