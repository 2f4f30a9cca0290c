"""The organisers' sign-in: a token exchanged for an opaque, expiring session id in a Secure,
HTTP-only, strict same-site cookie (never the token itself), and the sign-out."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from fastapi import APIRouter, Form, HTTPException, Request, status
from fastapi.responses import RedirectResponse, Response

from evaluator import crud
from evaluator.api.deps import SESSION_COOKIE, check_throttle, record_failure
from leaderboard.routes.deps import SessionDep

router = APIRouter(tags=["leaderboard"])


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
