"""Fill an evaluator database with scored submissions through ``evaluator.crud`` (tests, bench).

Every row goes the real way: ``reserve_submission`` then ``transition`` to its final state with
the result columns a scoring worker would write (and, for a back-dated row, its upload time).
Nothing here writes a row itself, so a seeded board counts its versions as a live one does.
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from benchmark.tracks import COMMUNICATION, PRIVACY, TRACKS
from evaluator import crud
from evaluator.tables import Status, Team


def team_id(session: Session, name: str) -> int:
    """The id of team ``name``, registering it when new."""
    found = session.scalar(select(Team.id).where(Team.name == name))
    if found is not None:
        return found
    team, _ = crud.create_team(session, name=name)
    return team.id


def add_submission(
    session: Session,
    *,
    team: str,
    track: int,
    method: str,
    status: Status = Status.FINISHED,
    reason: str | None = None,
    created_at: dt.datetime | None = None,
    **results: Any,
) -> str:
    """Create one submission in its final state (committed).

    Args:
        session: open session.
        team: team name (registered when new).
        track: a track number.
        method: method name.
        status: final state (finished, rejected, failed, queued...).
        reason: the rejection or failure reason.
        created_at: upload time to store instead of now.
        **results: result columns (``anls``, ``total_bytes``, ``epsilon``, ``per_round``...).

    Returns:
        The submission id.
    """
    submission = crud.reserve_submission(
        session,
        team_id=team_id(session, team),
        quota=1_000_000,
        track=track,
        method=method,
        metadata={"track": track, "method": method},
    )
    session.commit()
    uploaded = {} if created_at is None else {"created_at": created_at}
    crud.transition(
        session,
        submission_id=submission.id,
        from_status=Status.RECEIVED,
        to_status=Status.QUEUED,
        detail="upload complete",
        values=uploaded if status == Status.QUEUED else None,
    )
    if status != Status.QUEUED:
        crud.transition(
            session,
            submission_id=submission.id,
            from_status=Status.QUEUED,
            to_status=status,
            detail=reason,
            values={**results, **uploaded},
        )
    session.commit()
    return submission.id


def per_round(rounds: int, clients: int, message_bytes: int) -> list[dict[str, int]]:
    """Per-round tallies as the evaluator stores them (each client downloads and uploads once)."""
    each = clients * message_bytes
    return [
        {"round": r, "up": each, "down": each, "total": 2 * each, "clients": clients,
         "messages": 2 * clients}
        for r in range(1, rounds + 1)
    ]  # fmt: skip


def fill_random(session: Session, *, n: int, teams: int = 50, seed: int = 0) -> None:
    """``n`` plausible submissions of both tracks over ``teams`` teams (about 10% rejected).

    Args:
        session: open session.
        n: submissions to create.
        teams: distinct teams.
        seed: random seed.
    """
    rng = random.Random(seed)
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    for i in range(n):
        track = COMMUNICATION.number if rng.random() < 0.6 else PRIVACY.number
        created = start + dt.timedelta(minutes=i)
        name = f"team-{rng.randrange(teams):03d}"
        if rng.random() < 0.1:
            add_submission(
                session, team=name, track=track, method="broken", status=Status.REJECTED,
                reason="model: missing tensor", created_at=created,
            )  # fmt: skip
            continue
        rounds, clients = rng.randint(1, 20), rng.choice([1, 2, 5])
        message = int(10 ** rng.uniform(5, 9))
        anls = rng.uniform(0.3, 0.95)
        results: dict[str, Any] = {
            "anls": anls, "anls_in": min(1.0, anls + 0.03), "anls_out": max(0.0, anls - 0.04),
            "accuracy": anls - 0.1, "total_bytes": 2 * rounds * clients * message,
            "bytes_up": rounds * clients * message, "bytes_down": rounds * clients * message,
            "rounds": rounds, "messages": 2 * rounds * clients,
            "per_round": per_round(rounds, clients, message),
        }  # fmt: skip
        if "privacy" in TRACKS[track].parts:  # a privacy claim, checked or not
            results.update(
                epsilon=rng.choice([0.5, 1.0, 3.9, 4.0, 8.0, 12.0]), delta=1e-5,
                privacy_verified=rng.random() < 0.8,
                privacy_report={"verified": True, "accountant": {"epsilon_rdp": 1.0}},
            )  # fmt: skip
        add_submission(
            session, team=name, track=track, method=f"method-{i}", created_at=created, **results
        )
