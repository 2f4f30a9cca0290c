"""The status endpoint: the caller and the board version in one query on every request, the
view read in one more query only when the board changed since it was last read."""

from __future__ import annotations

import httpx
from sqlalchemy import event, update

from bench.loadtest import seed
from evaluator import crud
from evaluator.core.db import session_factory, session_scope
from evaluator.core.security import hash_token
from evaluator.schemas import SubmissionPublic
from evaluator.tables import Team
from tests.evaluator.conftest import LiveServer


def _orm_view(db_url: str, submission_id: str, *, organiser: bool) -> dict:
    """The view as the ORM path builds it (team and events loaded as relationships)."""
    with session_factory(db_url)() as session:
        row = crud.get_submission(session, submission_id=submission_id)
        return SubmissionPublic.from_row(row, full_precision=organiser).model_dump(mode="json")


def test_the_view_is_the_orm_view_for_the_team_and_the_organiser(settings) -> None:  # type: ignore[no-untyped-def]
    token, submission = seed(settings.db_url)
    with session_scope(settings.db_url) as session:
        organiser = crud.create_team(session, name="org", organiser=True)[1]
        other = crud.create_team(session, name="other")[1]
    with LiveServer(settings) as server:
        statements: list[str] = []
        engine = server.server.config.app.state.sessions.kw["bind"]
        listener = lambda *args: statements.append(args[2])  # noqa: E731
        event.listen(engine, "before_cursor_execute", listener)
        url = f"{server.url}/api/v1/submissions/{submission}"
        own = httpx.get(url, headers={"Authorization": f"Bearer {token}"})
        assert len(statements) == 2  # the caller, then the view (read once)
        again = httpx.get(url, headers={"Authorization": f"Bearer {token}"})
        assert len(statements) == 3  # the caller only: the view is the one read before
        full = httpx.get(url, headers={"Authorization": f"Bearer {organiser}"})
        assert len(statements) == 5  # the organiser's view has full precision: read once
        foreign = httpx.get(url, headers={"Authorization": f"Bearer {other}"})
        assert len(statements) == 6  # served from the kept view's owner: not this team's
        event.remove(engine, "before_cursor_execute", listener)
    assert own.status_code == again.status_code == full.status_code == 200
    assert again.content == own.content
    assert own.json() == _orm_view(settings.db_url, submission, organiser=False)
    assert full.json() == _orm_view(settings.db_url, submission, organiser=True)
    assert [t["to_status"] for t in own.json()["transitions"]][-1] == "finished"
    assert foreign.status_code == 404


def test_a_revoked_token_is_refused_at_once(settings) -> None:  # type: ignore[no-untyped-def]
    token, submission = seed(settings.db_url)
    with LiveServer(settings) as server:
        url = f"{server.url}/api/v1/submissions/{submission}"
        auth = {"Authorization": f"Bearer {token}"}
        assert httpx.get(url, headers=auth).status_code == 200
        # Revoke: the token's hash no longer names the team (as a replaced organiser token).
        with session_scope(settings.db_url) as session:
            session.execute(
                update(Team).where(Team.token_hash == hash_token(token)).values(
                    token_hash="0" * 64
                )
            )
        refused = [httpx.get(url, headers=auth) for _ in range(settings.auth_failures_allowed)]
        assert [r.status_code for r in refused] == [401] * settings.auth_failures_allowed
        assert "unknown token" in refused[0].json()["detail"]
        # Each refusal counted as a failed authentication: the address is throttled now.
        assert httpx.get(url, headers=auth).status_code == 429


def test_a_change_shows_on_the_next_request(settings) -> None:  # type: ignore[no-untyped-def]
    token, submission = seed(settings.db_url)
    with session_scope(settings.db_url) as session:
        organiser = crud.create_team(session, name="org", organiser=True)[1]
    with LiveServer(settings) as server:
        url = f"{server.url}/api/v1/submissions/{submission}"
        auth = {"Authorization": f"Bearer {token}"}
        assert httpx.get(url, headers=auth).json()["status"] == "finished"
        assert httpx.get(url, headers=auth).json()["status"] == "finished"  # kept
        response = httpx.post(
            f"{url}/rescore", headers={"Authorization": f"Bearer {organiser}"}
        )  # an organiser re-scores it: the state and the transitions change
        assert response.status_code == 202
        after = httpx.get(url, headers=auth).json()
    assert after["status"] == "queued"
    assert after["transitions"][-1]["to_status"] == "queued"
    # No worker runs in this test: the queued view says it waits for one (issue 46).
    assert after["waiting"].startswith("waiting for a scoring worker since ")
    unset = {"waiting": None, "waiting_for_worker_since": None}
    assert {**after, **unset} == _orm_view(settings.db_url, submission, organiser=False)
