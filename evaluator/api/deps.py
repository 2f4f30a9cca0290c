"""Typed dependencies of the routes: settings, database session, calling team, organiser."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from evaluator import crud
from evaluator.core.config import Settings
from evaluator.models import Team
from evaluator.queue import TaskQueue
from evaluator.storage import SubmissionStore

_bearer = HTTPBearer(auto_error=False, description="the team's API token (`pflkit team create`)")


def get_settings(request: Request) -> Settings:
    """The app's settings."""
    return request.app.state.settings


def get_session(request: Request) -> Iterator[Session]:
    """A database session for one request (committed on success)."""
    session = request.app.state.sessions()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def get_store(request: Request) -> SubmissionStore:
    """The upload storage."""
    return request.app.state.store


def get_queue(request: Request) -> TaskQueue:
    """The task queue."""
    return request.app.state.queue


SettingsDep = Annotated[Settings, Depends(get_settings)]
SessionDep = Annotated[Session, Depends(get_session)]
StoreDep = Annotated[SubmissionStore, Depends(get_store)]
QueueDep = Annotated[TaskQueue, Depends(get_queue)]


def current_team(
    session: SessionDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Team:
    """The team whose bearer token came with the request.

    Raises:
        HTTPException: 401 when the token is missing or unknown.
    """
    if credentials is None or credentials.scheme.lower() != "bearer" or not credentials.credentials:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "missing bearer token: send 'Authorization: Bearer <token>' with your team's token",
            headers={"WWW-Authenticate": "Bearer"},
        )
    team = crud.team_by_token(session, token=credentials.credentials)
    if team is None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "unknown token: check the token `pflkit team create` printed for your team",
            headers={"WWW-Authenticate": "Bearer"},
        )
    # End the read transaction now: an upload may stream for minutes after this check.
    session.commit()
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
