"""Kept rows brought up to date from the changed submissions equal a full read, on SQLite and
PostgreSQL, after any mix of changes (and a deletion reads everything again)."""

from __future__ import annotations

import datetime as dt
import random
import threading

from sqlalchemy.orm import Session

from bench.seed_leaderboard import add_submission, team_id
from evaluator import crud
from evaluator.core.db import session_factory
from evaluator.tables import Status
from leaderboard import source
from leaderboard.board import build_board
from leaderboard.kept_rows import KeptRows

T0 = dt.datetime(2026, 5, 1, tzinfo=dt.UTC)


def _results(rng: random.Random, track: int) -> dict:
    anls = round(rng.uniform(0.3, 0.95), 6)
    results = {"anls": anls, "accuracy": anls - 0.1, "total_bytes": rng.randrange(1, 10**9)}
    if track == 2:
        results |= {"epsilon": rng.choice([0.5, 1.0, 4.0, 8.0, 12.0]), "delta": 1e-5,
                    "privacy_verified": rng.random() < 0.8}  # fmt: skip
    if track == 3:
        results |= {"personal_anls": anls + 0.01, "personal_anls_std": 0.02,
                    "personal_worst_anls": anls - 0.1, "global_unseen_anls": anls - 0.05,
                    "personal_clients": [{"client": 0, "n": 3, "personal_anls": anls,
                                          "global_anls": anls - 0.1}]}  # fmt: skip
    return results


def _change(session: Session, rng: random.Random, step: int) -> str:
    """One random change the way the service makes it; returns what it did."""
    ids = [row.id for row in source.load_rows(session)]
    action = rng.choice(["score", "score", "reject", "worker", "flag", "flag", "rescore",
                         "requeue", "new team", "delete"])  # fmt: skip
    track = rng.choice([1, 2, 3])
    created = T0 + dt.timedelta(minutes=step)
    if action in ("score", "new team"):
        team = f"team-{step}" if action == "new team" else f"team-{rng.randrange(5)}"
        add_submission(session, team=team, track=track, method=f"m{step}", created_at=created,
                       **_results(rng, track))  # fmt: skip
    elif action == "reject":
        add_submission(session, team=f"team-{rng.randrange(5)}", track=track, method="bad",
                       status=Status.REJECTED, reason="model: NaN", created_at=created)  # fmt: skip
    elif action == "worker":  # queued, claimed, then finished or failed
        new = add_submission(session, team=f"team-{rng.randrange(5)}", track=track,
                             method=f"w{step}", status=Status.QUEUED)  # fmt: skip
        assert crud.claim(session, submission_id=new, worker="w", lease_seconds=60)
        session.commit()
        end = rng.choice([Status.FINISHED, Status.FAILED])
        assert crud.transition(session, submission_id=new, from_status=Status.SCORING,
                               to_status=end, lease_owner="w", detail="boom",
                               values=_results(rng, track) if end == Status.FINISHED else {})  # fmt: skip
    elif action == "flag" and ids:
        which = rng.choice(["hide", "unhide", "disqualify", "requalify"])
        crud.set_flags(session, submission_id=rng.choice(ids), organiser="org", action=which,
                       reason="copied")  # fmt: skip
    elif action == "rescore" and ids:
        chosen = rng.choice(ids)
        current = crud.get_submission(session, submission_id=chosen).status
        crud.request_rescore(session, submission_id=chosen, current_status=current,
                             requested_by="org")  # fmt: skip
    elif action == "requeue":  # a worker died: its lease expired
        new = add_submission(session, team=f"team-{rng.randrange(5)}", track=track,
                             method=f"r{step}", status=Status.QUEUED)  # fmt: skip
        assert crud.claim(session, submission_id=new, worker="w", lease_seconds=-1)
        session.commit()
        later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=5)
        assert crud.requeue_expired(session, submission_id=new, now=later, max_attempts=1)
    elif action == "delete":  # an upload that never completed
        row = crud.reserve_submission(session, team_id=team_id(session, "team-0"),
                                      quota=10**6, track=track, method="partial")  # fmt: skip
        session.commit()
        if rng.random() < 0.5:
            crud.delete_submission(session, submission_id=row.id)
            action = "deleted"
    session.commit()
    return action


def _boards_equal(kept: list, full: list) -> None:
    assert {r.id: r for r in kept} == {r.id: r for r in full}
    assert len(kept) == len(full)
    for all_submissions in (False, True):
        for public in (False, True):
            options = {"threshold": 0.6, "all_submissions": all_submissions, "public": public}
            assert build_board(kept, **options) == build_board(full, **options)


def test_kept_rows_equal_a_full_read_after_random_changes(database_url: str) -> None:
    rng = random.Random(21)
    kept = KeptRows()
    done: list[str] = []
    with session_factory(database_url)() as session:
        for step in range(12):
            _change(session, rng, step)
        _boards_equal(kept.read(session), source.load_rows(session))
        assert (kept.full_reads, kept.changed_reads) == (1, 0)
        for step in range(12, 120):
            done.append(_change(session, rng, step))
            if rng.random() < 0.6:
                full_reads = kept.full_reads
                _boards_equal(kept.read(session), source.load_rows(session))
                assert kept.full_reads == full_reads + ("deleted" in done)
                done.clear()
    assert kept.changed_reads > 20
    assert kept.full_reads >= 2  # the deletions were read in full


def test_a_deleted_submission_is_read_in_full(database_url: str) -> None:
    kept = KeptRows()
    with session_factory(database_url)() as session:
        add_submission(session, team="a", track=1, method="m", anls=0.9, total_bytes=5)
        partial = crud.reserve_submission(session, team_id=team_id(session, "b"), quota=9,
                                          track=1, method="partial")  # fmt: skip
        session.commit()
        assert partial.id in {r.id for r in kept.read(session)}
        crud.delete_submission(session, submission_id=partial.id)
        session.commit()
        rows = kept.read(session)
        assert partial.id not in {r.id for r in rows}
        assert (kept.full_reads, kept.changed_reads) == (2, 0)
        _boards_equal(rows, source.load_rows(session))


def test_a_change_marks_only_its_submission(database_url: str) -> None:
    with session_factory(database_url)() as session:
        first = add_submission(session, team="a", track=1, method="m", anls=0.9, total_bytes=5)
        second = add_submission(session, team="b", track=1, method="m", anls=0.8, total_bytes=5)
        before = crud.board_version(session)
        assert [r.id for r in source.load_changed_rows(session, since=before)] == []
        assert crud.set_flags(session, submission_id=first, organiser="o", action="hide")
        session.commit()
        changed = source.load_changed_rows(session, since=before)
        assert [(r.id, r.hidden) for r in changed] == [(first, True)]
        assert crud.board_state(session) == (before + 1, 0)
        assert second in {r.id for r in source.load_changed_rows(session, since=0)}


def test_kept_rows_miss_no_change_made_while_they_are_read(database_url: str) -> None:
    """A writer lands scores and hides some while a reader brings its kept rows up to date
    again and again: each read holds every change of the version it read first (or a later
    state), and the last equals a full read (a change lost to the race would stay missing)."""
    kept = KeptRows()
    factory = session_factory(database_url)
    finished = threading.Event()
    landed: list[tuple[int, str, str]] = []  # (version, submission, "finished" or "hidden")
    errors: list[BaseException] = []

    def write() -> None:
        rng = random.Random(5)
        try:
            with factory() as session:
                for step in range(40):
                    track = rng.choice([1, 2, 3])
                    new = add_submission(session, team=f"t{step % 4}", track=track,
                                         method=f"m{step}", status=Status.QUEUED)  # fmt: skip
                    assert crud.claim(session, submission_id=new, worker="w", lease_seconds=60)
                    session.commit()
                    assert crud.transition(session, submission_id=new, from_status=Status.SCORING,
                                           to_status=Status.FINISHED, lease_owner="w",
                                           values=_results(rng, track))  # fmt: skip
                    session.commit()
                    landed.append((crud.board_version(session), new, "finished"))
                    session.commit()
                    if step % 3 == 0:
                        crud.set_flags(session, submission_id=new, organiser="o", action="hide")
                        session.commit()
                        landed.append((crud.board_version(session), new, "hidden"))
                        session.commit()
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            errors.append(exc)
        finally:
            finished.set()

    writer = threading.Thread(target=write)
    writer.start()
    checked = 0
    with factory() as session:
        while not finished.is_set():
            version = crud.board_version(session)
            session.commit()
            rows = {r.id: r for r in kept.read(session)}
            session.commit()
            for at, submission, state in list(landed):
                if at <= version:
                    row = rows[submission]
                    assert row.hidden if state == "hidden" else row.status == "finished"
                    checked += 1
        writer.join(timeout=60)
        assert not errors, errors
        _boards_equal(kept.read(session), source.load_rows(session))
    assert len(landed) == 54
    assert checked > 0
