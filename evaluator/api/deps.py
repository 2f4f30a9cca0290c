"""Typed dependencies of the routes: settings, database session, calling team, organiser.

This module is the one place that authenticates: participants and organisers by bearer token,
organisers of the pages also by the opaque session cookie of ``/leaderboard/organiser/login``.
Failed attempts are throttled per client address (``evaluator.core.throttle``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Annotated, NoReturn, TypeVar

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from evaluator import crud
from evaluator.core.config import Settings
from evaluator.core.db import committed
from evaluator.core.throttle import FailedAuthThrottle
from evaluator.queue import TaskQueue
from evaluator.storage import SubmissionStore
from evaluator.tables import Team

T = TypeVar("T")
SESSION_COOKIE = "pflkit_session"
_bearer = HTTPBearer(auto_error=False, description="the team's API token (`pflkit team create`)")


def get_settings(request: Request) -> Settings:
    """The app's settings."""
    return request.app.state.settings


def get_session(request: Request) -> Iterator[Session]:
    """A database session for one request, committed on success before the response is sent.

    ``SessionDep`` declares ``scope="function"``: with FastAPI's default scope the code after
    ``yield`` runs once the response has gone, so a client could read its answer (a new team's
    token, say) and ask again before the commit made it visible.
    """
    with committed(request.app.state.sessions()) as session:
        yield session


def get_store(request: Request) -> SubmissionStore:
    """The upload storage."""
    return request.app.state.store


def get_queue(request: Request) -> TaskQueue:
    """The task queue."""
    return request.app.state.queue


SettingsDep = Annotated[Settings, Depends(get_settings)]
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
StoreDep = Annotated[SubmissionStore, Depends(get_store)]
QueueDep = Annotated[TaskQueue, Depends(get_queue)]


def client_address(request: Request) -> str:
    """The address failed authentications are counted against."""
    return request.client.host if request.client else "unknown"


def check_throttle(request: Request) -> None:
    """Refuse authentication from an address with too many recent failures.

    Raises:
        HTTPException: 429 with ``Retry-After``.
    """
    throttle: FailedAuthThrottle = request.app.state.throttle
    wait = throttle.retry_after(client_address(request))
    if wait is not None:
        raise HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS,
            f"too many failed authentications from this address; try again in {wait} s",
            headers={"Retry-After": str(wait)},
        )


def record_failure(request: Request) -> None:
    """Count a failed authentication of the request's address."""
    request.app.state.throttle.record_failure(client_address(request))


BearerDep = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


def bearer_token(request: Request, credentials: HTTPAuthorizationCredentials | None) -> str:
    """The presented bearer token, once the address is not throttled.

    Raises:
        HTTPException: 401 when the token is missing, 429 after too many failures.
    """
    check_throttle(request)
    if credentials is None or credentials.scheme.lower() != "bearer" or not credentials.credentials:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "missing bearer token: send 'Authorization: Bearer <token>' with your team's token",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return credentials.credentials


def refuse_unknown_token(request: Request) -> NoReturn:
    """Count the failed authentication and answer 401.

    Raises:
        HTTPException: always.
    """
    record_failure(request)
    raise HTTPException(
        status.HTTP_401_UNAUTHORIZED,
        "unknown token: check the token `pflkit team create` printed for your team",
        headers={"WWW-Authenticate": "Bearer"},
    )


def authenticate(
    request: Request, session: Session, credentials: HTTPAuthorizationCredentials | None
) -> Team:
    """The team whose bearer token came with the request.

    Raises:
        HTTPException: 401 when the token is missing or unknown, 429 after too many failures.
    """
    team = crud.team_by_token(session, token=bearer_token(request, credentials))
    if team is None:
        refuse_unknown_token(request)
    return team


def current_team(request: Request, session: SessionDep, credentials: BearerDep) -> Team:
    """The calling team (see :func:`authenticate`), its read transaction ended."""
    team = authenticate(request, session, credentials)
    # End the read transaction now: an upload may stream for minutes after this check.
    session.commit()
    return team


async def read_as_team(
    request: Request,
    credentials: HTTPAuthorizationCredentials | None,
    read: Callable[[Session, Team], T],
) -> T:
    """Authenticate and run ``read(session, team)`` in one worker thread and one short session.

    Read-only endpoints use this instead of the session dependency: their connection is held
    for the queries only, and each request takes one thread of the pool instead of three (the
    session's set-up, the authentication and the endpoint each took one).
    """

    def work() -> T:
        with request.app.state.sessions() as session:
            return read(session, authenticate(request, session, credentials))

    return await run_in_threadpool(work)


def organiser_from_request(request: Request, session: Session) -> Team | None:
    """The organiser behind the request's bearer token or session cookie, or None.

    A presented credential that is not an organiser's counts as a failed authentication.

    Raises:
        HTTPException: 429 after too many failures from the address.
    """
    header = request.headers.get("authorization", "")
    token = header[7:].strip() if header.lower().startswith("bearer ") else ""
    cookie = request.cookies.get(SESSION_COOKIE, "")
    if not token and not cookie:
        return None
    check_throttle(request)
    if token:
        team = crud.team_by_token(session, token=token)
        team = team if team is not None and team.is_organiser else None
    else:
        team = crud.organiser_by_session(session, session_id=cookie)
    if team is None:
        record_failure(request)
    return team


def require_organiser(request: Request, session: SessionDep) -> Team:
    """The calling organiser (bearer token or signed-in session).

    Raises:
        HTTPException: 401 without organiser credentials, 429 after too many failures.
    """
    team = organiser_from_request(request, session)
    if team is None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "organisers only: send 'Authorization: Bearer <organiser token>' "
            "or sign in at /leaderboard/organiser",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return team


CurrentTeam = Annotated[Team, Depends(current_team)]


def organiser(team: CurrentTeam) -> Team:
    """The calling team, required to hold the organiser role.

    Raises:
        HTTPException: 403 for a participant's token.
    """
    if not team.is_organiser:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "this endpoint needs an organiser token")
    return team


Organiser = Annotated[Team, Depends(organiser)]
OrganiserSession = Annotated[Team, Depends(require_organiser)]
