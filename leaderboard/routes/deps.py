"""The typed dependencies of the leaderboard's routes (``evaluator.api.deps``'s authentication)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from sqlalchemy.orm import Session

from evaluator.api.deps import get_session, require_organiser
from evaluator.tables import Team

SessionDep = Annotated[Session, Depends(get_session)]
OrganiserDep = Annotated[Team, Depends(require_organiser)]
