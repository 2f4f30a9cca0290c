"""Teams: registration, the token lookup, and the row lock that serialises a team's uploads."""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from evaluator import team_names
from evaluator.core.security import hash_token, new_token
from evaluator.tables import Team, utcnow

InvalidTeamName = team_names.InvalidTeamName


class TeamExists(Exception):
    """A team of that name is already registered."""


def create_team(session: Session, *, name: str, organiser: bool = False) -> tuple[Team, str]:
    """Register a team and return it with its API token (the only time the token is seen).

    Args:
        session: open session (committed by the caller).
        name: team name, normalised and validated by :mod:`evaluator.team_names`.
        organiser: give the team the organiser role.

    Returns:
        The new team row and its plain token.

    Raises:
        InvalidTeamName: the name is not acceptable (the message says why).
        TeamExists: the name, or one a reader could mistake for it, is taken.
    """
    name = team_names.normalise(name)
    name_key = team_names.key(name)
    taken = session.scalar(select(Team.name).where(Team.name_key == name_key))
    if taken is not None:
        raise TeamExists(
            f"a team named {taken!r} already exists"
            + ("" if taken == name else f" and {name!r} reads like it")
        )
    token = new_token()
    team = Team(
        name=name,
        name_key=name_key,
        token_hash=hash_token(token),
        is_organiser=organiser,
        created_at=utcnow(),
    )
    session.add(team)
    session.flush()
    return team, token


def team_by_token(session: Session, *, token: str) -> Team | None:
    """The team that holds ``token``, or None."""
    return session.scalar(select(Team).where(Team.token_hash == hash_token(token)))


def lock_team(session: Session, *, team_id: int) -> None:
    """Serialise one team's uploads: update its row (PostgreSQL row lock, SQLite write lock)."""
    session.execute(update(Team).where(Team.id == team_id).values(upload_seq=Team.upload_seq + 1))
