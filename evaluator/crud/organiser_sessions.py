"""The organisers' sign-in sessions of the leaderboard's pages (an opaque id, stored hashed)."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select
from sqlalchemy.orm import Session, joinedload

from evaluator.core.security import hash_token
from evaluator.tables import OrganiserSession, Team, utcnow


def create_organiser_session(session: Session, *, team_id: int, lifetime: dt.timedelta) -> str:
    """Open a sign-in session of the organiser pages; returns its opaque id (stored hashed).

    Args:
        session: open session (committed by the caller).
        team_id: the organiser team.
        lifetime: how long the session lasts.

    Returns:
        The session id to put in the cookie.
    """
    import secrets

    now = utcnow()
    session.execute(OrganiserSession.__table__.delete().where(OrganiserSession.expires_at < now))
    value = secrets.token_urlsafe(32)
    session.add(
        OrganiserSession(
            id_hash=hash_token(value), team_id=team_id, created_at=now, expires_at=now + lifetime
        )
    )
    return value


def organiser_by_session(session: Session, *, session_id: str) -> Team | None:
    """The organiser team of an unexpired sign-in session, or None."""
    found = session.scalar(
        select(OrganiserSession)
        .options(joinedload(OrganiserSession.team))
        .where(
            OrganiserSession.id_hash == hash_token(session_id),
            OrganiserSession.expires_at > utcnow(),
        )
    )
    if found is None or not found.team.is_organiser:
        return None
    return found.team


def end_organiser_session(session: Session, *, session_id: str) -> None:
    """Sign out: remove the session."""
    session.execute(
        OrganiserSession.__table__.delete().where(
            OrganiserSession.id_hash == hash_token(session_id)
        )
    )
