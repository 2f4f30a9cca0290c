"""Teams (organisers only): create a team and receive its token once."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, status

from evaluator import crud
from evaluator.api.deps import Organiser, SessionDep
from evaluator.api.responses import DATABASE_UNAVAILABLE, ORGANISER_AUTH, TEAM_EXISTS
from evaluator.schemas import TeamCreate, TeamCreated

router = APIRouter(prefix="/api/v1/teams", tags=["teams"])


@router.post(
    "",
    response_model=TeamCreated,
    status_code=status.HTTP_201_CREATED,
    responses={**ORGANISER_AUTH, **TEAM_EXISTS, **DATABASE_UNAVAILABLE},
)
def create_team(body: TeamCreate, session: SessionDep, _: Organiser) -> TeamCreated:
    """Register a team; the answer holds its API token, which is not stored anywhere."""
    try:
        team, token = crud.create_team(session, name=body.name, organiser=body.organiser)
    except crud.TeamExists as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
    return TeamCreated(id=team.id, name=team.name, organiser=team.is_organiser, token=token)
