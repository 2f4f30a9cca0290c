"""Database operations of the evaluator (keyword-only; the routes and the worker call these).

Every state change of a submission goes through :func:`transition`, which checks the expected
current state in the ``UPDATE``'s ``WHERE`` clause, so two processes can never both move the
same submission: whoever's update matches a row wins, the other sees ``False``.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, and_, bindparam, func, or_, select, update
from sqlalchemy.orm import Session, joinedload, selectinload

from evaluator import team_names
from evaluator.core.security import hash_token, new_token
from evaluator.models import (
    NOT_COUNTED_IN_QUOTA,
    PUBLIC_COLUMNS,
    TERMINAL,
    BoardVersion,
    OrganiserSession,
    Status,
    Submission,
    SubmissionEvent,
    SubmissionPublic,
    Team,
    utcnow,
)

InvalidTeamName = team_names.InvalidTeamName

_TIMESTAMP_OF = {
    Status.QUEUED: "queued_at",
    Status.SCORING: "scoring_started_at",
    Status.FINISHED: "finished_at",
    Status.REJECTED: "finished_at",
    Status.FAILED: "finished_at",
}


class QuotaExceeded(Exception):
    """The team has used its submissions for the current UTC day."""


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


def lock_checkpoint(session: Session, *, model_sha256: str) -> None:
    """Serialise the copy checks of one checkpoint until the caller's transaction ends.

    Two teams uploading the same checkpoint at the same instant lock different team rows, so
    on PostgreSQL both copy checks could run before either row is committed, and both pass. A
    transaction-level advisory lock keyed by the hash makes the second check wait for the
    first upload's commit (and then see it). SQLite needs none: the transaction's first write
    (``lock_team``) takes the database's write lock, which serialises every upload already.
    Take it before ``lock_team`` (one lock order everywhere: checkpoint, team, board version).
    """
    if session.get_bind().dialect.name == "postgresql":
        session.execute(select(func.pg_advisory_xact_lock(int(model_sha256[:15], 16))))


def board_changed(session: Session, *, submission_id: str | None) -> None:
    """Advance the leaderboard's version in the caller's transaction (every submission change)
    and mark the changed submission with the new version.

    The pages cached for the old version are stale once the transaction commits; the marker
    lets the leaderboard re-read only the submissions changed since the version it last read.
    Called last in a transaction's writes, so its row lock is held only until the commit. That
    lock also serialises the changes: once version V is visible, so is every change marked V
    or lower.

    Args:
        session: open session (committed by the caller).
        submission_id: the changed submission, or None for a change no marker can show (a
            deleted submission): readers then read every submission again.
    """
    statement = update(BoardVersion).where(BoardVersion.id == 1)
    if submission_id is None:
        statement = statement.values(
            version=BoardVersion.version + 1, unmarked_version=BoardVersion.version + 1
        )
    else:
        statement = statement.values(version=BoardVersion.version + 1)
    version = session.execute(statement.returning(BoardVersion.version)).scalar_one_or_none()
    if submission_id is not None and version is not None:
        session.execute(
            update(Submission)
            .where(Submission.id == submission_id)
            .values(board_version=version)
            .execution_options(synchronize_session=False)
        )


def board_version(session: Session) -> int:
    """The leaderboard's current version (read it before the rows it keys)."""
    return int(session.scalar(select(BoardVersion.version).where(BoardVersion.id == 1)) or 0)


def board_state(session: Session) -> tuple[int, int]:
    """The leaderboard's current version and the version of its last unmarked change (see
    :func:`board_changed`), in one read."""
    row = session.execute(
        select(BoardVersion.version, BoardVersion.unmarked_version).where(BoardVersion.id == 1)
    ).first()
    return (0, 0) if row is None else (int(row[0]), int(row[1]))


def day_start(now: dt.datetime) -> dt.datetime:
    """Midnight UTC of the day of ``now``: the quota window."""
    return now.astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def used_quota(session: Session, *, team_id: int, now: dt.datetime) -> int:
    """Submissions of a team today that count against its quota."""
    return (
        session.scalar(
            select(func.count(Submission.id)).where(
                Submission.team_id == team_id,
                Submission.created_at >= day_start(now),
                Submission.status.not_in(NOT_COUNTED_IN_QUOTA),
            )
        )
        or 0
    )


def reserve_submission(
    session: Session,
    *,
    team_id: int,
    quota: int,
    track: int,
    method: str,
    description: str = "",
    metadata: dict[str, Any] | None = None,
) -> Submission:
    """Check the daily quota and create a ``received`` submission, atomically per team.

    The first statement updates the team's row: on PostgreSQL that takes the row lock, on SQLite
    the database write lock, so concurrent uploads of one team are counted one after the other.
    The caller commits right away to release the lock.

    Args:
        session: a session with no transaction in progress.
        team_id: the uploading team.
        quota: submissions allowed per UTC day.
        track: a `benchmark.tracks` number.
        method: short method name.
        description: free text.
        metadata: the upload's metadata object.

    Returns:
        The new submission (flushed, not committed).

    Raises:
        QuotaExceeded: the team already has ``quota`` counted submissions today.
    """
    lock_team(session, team_id=team_id)
    now = utcnow()
    used = used_quota(session, team_id=team_id, now=now)
    if used >= quota:
        raise QuotaExceeded(
            f"daily quota of {quota} submissions reached ({used} today, failed and rejected "
            "ones excluded); try again after 00:00 UTC"
        )
    submission = Submission(
        id=str(uuid.uuid4()),
        team_id=team_id,
        track=track,
        method=method,
        description=description,
        submission_metadata=metadata or {},
        status=Status.RECEIVED.value,
        created_at=now,
        updated_at=now,
        attempts=0,
        has_privacy=False,
        hidden=False,
    )
    session.add(submission)
    session.add(
        SubmissionEvent(
            submission_id=submission.id,
            from_status=None,
            to_status=Status.RECEIVED.value,
            at=now,
            detail="upload started",
        )
    )
    session.flush()
    board_changed(session, submission_id=submission.id)
    return submission


def delete_submission(session: Session, *, submission_id: str) -> None:
    """Remove a submission whose upload did not complete (nothing half-stored remains)."""
    row = session.get(Submission, submission_id)
    if row is not None:
        session.delete(row)
        session.flush()
        board_changed(session, submission_id=None)


def transition(
    session: Session,
    *,
    submission_id: str,
    from_status: Status | tuple[Status, ...],
    to_status: Status,
    detail: str | None = None,
    worker: str | None = None,
    lease_owner: str | None = None,
    values: dict[str, Any] | None = None,
) -> bool:
    """Move a submission from one of ``from_status`` to ``to_status`` if it is still there.

    Args:
        session: open session (committed by the caller).
        submission_id: the submission.
        from_status: the state (or states) the caller expects it to be in.
        to_status: the new state.
        detail: reason or note recorded with the transition (and as ``reason`` when the new
            state is rejected or failed).
        worker: the worker making the change, recorded in the event.
        lease_owner: when given, the update only applies while this worker holds the lease.
        values: further columns to set in the same update.

    Returns:
        Whether the submission was in an expected state (and is now in ``to_status``).
    """
    expected = (from_status,) if isinstance(from_status, Status) else from_status
    now = utcnow()
    columns: dict[str, Any] = {"status": to_status.value, "updated_at": now}
    if to_status in _TIMESTAMP_OF:
        columns[_TIMESTAMP_OF[to_status]] = now
    if to_status in (Status.REJECTED, Status.FAILED):
        columns["reason"] = detail
    elif to_status in (Status.FINISHED, Status.QUEUED):
        columns["reason"] = None
    if to_status != Status.SCORING:
        columns["lease_owner"] = None
        columns["lease_expires_at"] = None
    columns.update(values or {})
    statement = update(Submission).where(
        Submission.id == submission_id, Submission.status.in_([s.value for s in expected])
    )
    if lease_owner is not None:
        statement = statement.where(Submission.lease_owner == lease_owner)
    result = session.execute(
        statement.values(**columns).execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:
        return False
    previous = expected[0].value if len(expected) == 1 else None
    session.add(
        SubmissionEvent(
            submission_id=submission_id,
            from_status=previous,
            to_status=to_status.value,
            at=now,
            detail=detail,
            worker=worker,
        )
    )
    board_changed(session, submission_id=submission_id)
    return True


def request_rescore(
    session: Session, *, submission_id: str, current_status: str, requested_by: str
) -> bool:
    """Put a finished, rejected or failed submission back in the queue, attempts reset.

    Returns:
        False when the submission is still in progress or moved meanwhile; the caller
        commits and enqueues on True.
    """
    if current_status not in TERMINAL:
        return False
    return transition(
        session,
        submission_id=submission_id,
        from_status=Status(current_status),
        to_status=Status.QUEUED,
        detail=f"re-score requested by {requested_by}",
        values={"attempts": 0},
    )


def claim(session: Session, *, submission_id: str, worker: str, lease_seconds: float) -> bool:
    """Take the scoring lease of a queued submission.

    Jobs whose worker died are put back to ``queued`` by the reaper first, so every claim is a
    ``queued -> scoring`` transition.

    Args:
        session: open session (committed by the caller).
        submission_id: the submission.
        worker: identifier of the claiming worker.
        lease_seconds: lease length; renewed by :func:`renew_lease`.

    Returns:
        Whether this worker now owns the job.
    """
    now = utcnow()
    statement = (
        update(Submission)
        .where(Submission.id == submission_id, Submission.status == Status.QUEUED.value)
        .values(
            status=Status.SCORING.value,
            lease_owner=worker,
            lease_expires_at=now + dt.timedelta(seconds=lease_seconds),
            attempts=Submission.attempts + 1,
            scoring_started_at=now,
            updated_at=now,
        )
        .execution_options(synchronize_session=False)
    )
    if session.execute(statement).rowcount != 1:
        return False
    session.add(
        SubmissionEvent(
            submission_id=submission_id,
            from_status=Status.QUEUED.value,
            to_status=Status.SCORING.value,
            at=now,
            worker=worker,
        )
    )
    board_changed(session, submission_id=submission_id)
    return True


def renew_lease(session: Session, *, submission_id: str, worker: str, lease_seconds: float) -> bool:
    """Extend a held lease (heartbeat); False if the worker lost it."""
    now = utcnow()
    result = session.execute(
        update(Submission)
        .where(
            Submission.id == submission_id,
            Submission.status == Status.SCORING.value,
            Submission.lease_owner == worker,
        )
        .values(lease_expires_at=now + dt.timedelta(seconds=lease_seconds))
        .execution_options(synchronize_session=False)
    )
    return result.rowcount == 1


def expired_leases(session: Session, *, now: dt.datetime | None = None) -> list[str]:
    """Submissions in ``scoring`` whose worker stopped renewing its lease."""
    now = now or utcnow()
    return list(
        session.scalars(
            select(Submission.id).where(
                Submission.status == Status.SCORING.value, Submission.lease_expires_at < now
            )
        )
    )


def stale_received(session: Session, *, older_than: dt.datetime) -> list[str]:
    """Submissions whose upload started before ``older_than`` and never completed."""
    return list(
        session.scalars(
            select(Submission.id).where(
                Submission.status == Status.RECEIVED.value, Submission.created_at < older_than
            )
        )
    )


def queued(session: Session, *, older_than: dt.datetime | None = None) -> list[str]:
    """Queued submissions (optionally only those queued before ``older_than``), oldest first."""
    statement = select(Submission.id).where(Submission.status == Status.QUEUED.value)
    if older_than is not None:
        statement = statement.where(Submission.queued_at < older_than)
    return list(session.scalars(statement.order_by(Submission.queued_at)))


def get_submission(session: Session, *, submission_id: str) -> Submission | None:
    """A submission with its team and events loaded, or None."""
    return session.scalar(
        select(Submission)
        .options(joinedload(Submission.team), selectinload(Submission.events))
        .where(Submission.id == submission_id)
    )


@dataclass(frozen=True)
class Caller:
    """The team behind a token, and the board version read in the same statement."""

    team_id: int
    is_organiser: bool
    board_version: int


@dataclass(frozen=True)
class StatusRead:
    """A submission as the holder of a token may see it (``view`` None: no such submission for
    the caller), with its team's id and the board version it was read at."""

    caller: Caller
    owner_team_id: int | None
    view: SubmissionPublic | None


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


_CALLER = _caller_statement()
_SUBMISSION_FOR_TOKEN = _submission_for_token_statement()


def caller_by_token(session: Session, *, token: str) -> Caller | None:
    """The team holding ``token`` (by its hash, as :func:`team_by_token`) and the board
    version, in one short query; None for an unknown token."""
    row = session.execute(_CALLER, {"token_hash": hash_token(token)}).first()
    if row is None:
        return None
    return Caller(team_id=row[0], is_organiser=bool(row[1]), board_version=int(row[2] or 0))


def submission_for_token(session: Session, *, token: str, submission_id: str) -> StatusRead | None:
    """The status view of a submission as the holder of ``token`` may see it, in one query.

    The caller's team, the board version, the submission (only when it is the caller's or the
    caller organises), its team and its transitions come back in one round trip: one row per
    transition (one row without any), the submission's columns repeated.

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
        first, team=first["owner_name"], events=transitions, full_precision=caller.is_organiser
    )
    return StatusRead(caller, first["owner_id"], view)


def list_submissions(
    session: Session, *, team_id: int | None, limit: int = 100, offset: int = 0
) -> list[Submission]:
    """Submissions of one team (or all, for ``team_id=None``), newest first."""
    statement = select(Submission).options(
        selectinload(Submission.team), selectinload(Submission.events)
    )
    if team_id is not None:
        statement = statement.where(Submission.team_id == team_id)
    statement = statement.order_by(Submission.created_at.desc()).limit(limit).offset(offset)
    return list(session.scalars(statement))


def find_copy(
    session: Session, *, model_sha256: str, track: int, exclude_id: str
) -> Submission | None:
    """The earliest live submission of a track whose checkpoint has this tensor digest.

    Rejected and failed submissions, and uploads still arriving, do not count. The tracks are
    separate competitions: one checkpoint may be entered once in each.

    Args:
        session: open session.
        model_sha256: hex digest of the uploaded checkpoint's tensors (with its
            personalisations for track 3,
            ``evaluator.validation.tensor_digest.submission_fingerprint``).
        track: a `benchmark.tracks` number.
        exclude_id: the submission being checked.

    Returns:
        The original, or None.
    """
    return session.scalar(
        select(Submission)
        .where(
            Submission.model_sha256 == model_sha256,
            Submission.track == track,
            Submission.id != exclude_id,
            Submission.status.not_in([*NOT_COUNTED_IN_QUOTA, Status.RECEIVED.value]),
        )
        .order_by(Submission.created_at, Submission.id)
        .limit(1)
    )


def set_flags(
    session: Session,
    *,
    submission_id: str,
    organiser: str,
    action: str,
    reason: str = "",
) -> bool:
    """Hide, unhide, disqualify or requalify a submission, recording an event naming who.

    Args:
        session: open session (committed by the caller).
        submission_id: the submission.
        organiser: name of the acting organiser.
        action: ``hide``, ``unhide``, ``disqualify`` or ``requalify``.
        reason: why (kept as the disqualification reason).

    Returns:
        False when the submission does not exist.

    Raises:
        ValueError: an unknown action.
    """
    values: dict[str, Any] = {
        "hide": {"hidden": True},
        "unhide": {"hidden": False},
        "disqualify": {"disqualified_reason": reason[:2000]},
        "requalify": {"disqualified_reason": None},
    }[action]
    row = session.get(Submission, submission_id)
    if row is None:
        return False
    now = utcnow()
    session.execute(
        update(Submission)
        .where(Submission.id == submission_id)
        .values(updated_at=now, **values)
        .execution_options(synchronize_session=False)
    )
    session.add(
        SubmissionEvent(
            submission_id=submission_id,
            from_status=row.status,
            to_status=row.status,
            at=now,
            detail=f"{action} by {organiser}" + (f": {reason}" if reason else ""),
        )
    )
    board_changed(session, submission_id=submission_id)
    return True


def requeue_expired(
    session: Session, *, submission_id: str, now: dt.datetime, max_attempts: int
) -> Status | None:
    """Move a job whose lease expired back to ``queued``, or to ``failed`` after
    ``max_attempts`` lost workers (the reaper's transition).

    Args:
        session: open session (committed by the caller).
        submission_id: the submission.
        now: the reaper's clock; the lease must have expired before it.
        max_attempts: attempts after which the job is given up.

    Returns:
        The new state, or None when the job was not (or no longer) expired.
    """
    row = session.get(Submission, submission_id)
    if row is None:
        return None
    give_up = row.attempts >= max_attempts
    target = Status.FAILED if give_up else Status.QUEUED
    detail = (
        f"worker lost {row.attempts} times; giving up"
        if give_up
        else "worker stopped renewing its lease; re-queued"
    )
    moved = session.execute(
        update(Submission)
        .where(
            Submission.id == submission_id,
            Submission.status == Status.SCORING.value,
            Submission.lease_expires_at < now,
        )
        .values(
            status=target.value,
            updated_at=now,
            lease_owner=None,
            lease_expires_at=None,
            **({"reason": detail, "finished_at": now} if give_up else {"queued_at": now}),
        )
        .execution_options(synchronize_session=False)
    ).rowcount
    if moved != 1:
        return None
    session.add(
        SubmissionEvent(
            submission_id=submission_id,
            from_status=Status.SCORING.value,
            to_status=target.value,
            at=now,
            detail=detail,
        )
    )
    board_changed(session, submission_id=submission_id)
    return target


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
