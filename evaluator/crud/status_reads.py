"""The status endpoint's reads: the caller and the submission it may see, in one query each
(and one for the submission's track figures, when its track has its own).

The statements are built once at import (SQLAlchemy caches their SQL), so a status poll under
load costs one round trip, or a share of one: the API checks the tokens of the polls that arrived
together, and reads their submissions' change versions, in one query (:func:`status_polls`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Boolean, Select, and_, bindparam, cast, literal, null, or_, select, union_all
from sqlalchemy.orm import Session

from benchmark.tracks import TRACKS
from evaluator.core.security import hash_token
from evaluator.crud.figures import figures_of
from evaluator.schemas import PUBLIC_COLUMNS, SubmissionPublic
from evaluator.tables import BoardVersion, Submission, SubmissionEvent, Team


@dataclass(frozen=True)
class Caller:
    """The team behind a token, and the board version read in the same statement."""

    team_id: int
    is_organiser: bool
    board_version: int


@dataclass(frozen=True)
class StatusRead:
    """A submission as the holder of a token may see it (``view`` None: no such submission for
    the caller), with its team's id, the board version it was read at and the version of the
    submission's latest change (``submissions.board_version``)."""

    caller: Caller
    owner_team_id: int | None
    view: SubmissionPublic | None
    changed_version: int | None = None


def _version_column() -> Any:
    return (
        select(BoardVersion.__table__.c.version)
        .where(BoardVersion.__table__.c.id == 1)
        .scalar_subquery()
        .label("board_version")
    )


def _caller_statement() -> Select[Any]:
    """The query of :func:`caller_by_token` (built once: SQLAlchemy caches its SQL)."""
    teams = Team.__table__
    return select(teams.c.id, teams.c.is_organiser, _version_column()).where(
        teams.c.token_hash == bindparam("token_hash")
    )


def _submission_for_token_statement() -> Select[Any]:
    """The query of :func:`submission_for_token` (built once: SQLAlchemy caches its SQL)."""
    caller = Team.__table__.alias("caller")
    owner = Team.__table__.alias("owner")
    submissions = Submission.__table__
    events = SubmissionEvent.__table__
    visible = and_(
        submissions.c.id == bindparam("submission_id"),
        or_(submissions.c.team_id == caller.c.id, caller.c.is_organiser),
    )
    return (
        select(
            caller.c.id.label("caller_id"),
            caller.c.is_organiser.label("caller_is_organiser"),
            _version_column(),
            owner.c.id.label("owner_id"),
            owner.c.name.label("owner_name"),
            submissions.c.board_version.label("changed_version"),
            *(submissions.c[name] for name in PUBLIC_COLUMNS),
            events.c.from_status.label("event_from"),
            events.c.to_status.label("event_to"),
            events.c.at.label("event_at"),
            events.c.detail.label("event_detail"),
        )
        .select_from(
            caller.outerjoin(submissions, visible)
            .outerjoin(owner, owner.c.id == submissions.c.team_id)
            .outerjoin(events, events.c.submission_id == submissions.c.id)
        )
        .where(caller.c.token_hash == bindparam("token_hash"))
        .order_by(events.c.id)
    )


def _polls_statement() -> Any:
    """The query of :func:`status_polls` (built once): the callers by token hash and the
    submissions' change versions by id, two expanding ``IN`` look-ups in one round trip."""
    teams, submissions = Team.__table__, Submission.__table__
    callers = select(
        literal("caller").label("kind"), teams.c.token_hash.label("key"),
        teams.c.id.label("team_id"), teams.c.is_organiser.label("is_organiser"),
        _version_column(),
    ).where(teams.c.token_hash.in_(bindparam("token_hashes", expanding=True)))  # fmt: skip
    changed = select(
        literal("submission").label("kind"), submissions.c.id.label("key"),
        submissions.c.team_id.label("team_id"), cast(null(), Boolean).label("is_organiser"),
        submissions.c.board_version.label("board_version"),
    ).where(submissions.c.id.in_(bindparam("submission_ids", expanding=True)))  # fmt: skip
    return union_all(callers, changed)


_CALLER = _caller_statement()
_POLLS = _polls_statement()
_SUBMISSION_FOR_TOKEN = _submission_for_token_statement()


def caller_by_token(session: Session, *, token: str) -> Caller | None:
    """The team holding ``token`` (by its hash, as :func:`team_by_token`) and the board
    version, in one short query; None for an unknown token."""
    row = session.execute(_CALLER, {"token_hash": hash_token(token)}).first()
    if row is None:
        return None
    return Caller(team_id=row[0], is_organiser=bool(row[1]), board_version=int(row[2] or 0))


def status_polls(
    session: Session, *, token_hashes: Iterable[str], submission_ids: Iterable[str]
) -> tuple[dict[str, Caller], dict[str, int]]:
    """The status polls that arrived together, checked at once (``evaluator.core.shared_read``):
    the teams holding tokens of these hashes (:func:`hash_token`, each with the board version)
    and the version of each submission's latest change (``submissions.board_version``, which
    every change of what its status view shows advances, ``crud.board_changed``), in one query.

    Args:
        session: open session.
        token_hashes: the presented tokens' hashes.
        submission_ids: the polled submissions.

    Returns:
        The callers by token hash (a hash no team holds is left out) and the change versions by
        submission id (a submission that does not exist is left out).
    """
    hashes, ids = sorted(set(token_hashes)), sorted(set(submission_ids))
    callers: dict[str, Caller] = {}
    changed: dict[str, int] = {}
    if not hashes:
        return callers, changed
    rows = session.execute(_POLLS, {"token_hashes": hashes, "submission_ids": ids or [""]})
    for kind, key, team_id, is_organiser, version in rows:
        if kind == "caller":
            callers[key] = Caller(team_id=team_id, is_organiser=bool(is_organiser),
                                  board_version=int(version or 0))  # fmt: skip
        else:
            changed[key] = int(version or 0)
    return callers, changed


def _track_figures(session: Session, submission_id: str, track: int) -> dict[str, Any]:
    """The submission's track figures: a second query, only for a track that has figures."""
    if track not in TRACKS or not TRACKS[track].figures:
        return {}
    return figures_of(session, submission_ids=[submission_id]).get(submission_id, {})


def submission_for_token(session: Session, *, token: str, submission_id: str) -> StatusRead | None:
    """The status view of a submission as the holder of ``token`` may see it, in one query.

    The caller's team, the board version, the submission (only when it is the caller's or the
    caller organises), its team and its transitions come back in one round trip: one row per
    transition (one row without any), the submission's columns repeated; the figures of a
    track that has its own come in a second.

    Args:
        session: open session.
        token: the presented API token (looked up by its hash, as :func:`team_by_token`).
        submission_id: the submission.

    Returns:
        None for an unknown token; else the read (organisers get full precision).
    """
    parameters = {"token_hash": hash_token(token), "submission_id": submission_id}
    rows = session.execute(_SUBMISSION_FOR_TOKEN, parameters).mappings().all()
    if not rows:
        return None
    first = rows[0]
    caller = Caller(
        team_id=first["caller_id"],
        is_organiser=bool(first["caller_is_organiser"]),
        board_version=int(first["board_version"] or 0),
    )
    if first["id"] is None:
        return StatusRead(caller, None, None)
    transitions = [
        (r["event_from"], r["event_to"], r["event_at"], r["event_detail"])
        for r in rows
        if r["event_to"] is not None
    ]
    view = SubmissionPublic.from_values(
        first, team=first["owner_name"], events=transitions, full_precision=caller.is_organiser,
        figures=_track_figures(session, first["id"], first["track"]),
    )  # fmt: skip
    return StatusRead(caller, first["owner_id"], view, int(first["changed_version"] or 0))
