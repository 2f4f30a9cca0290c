"""The status endpoint's conditional reads: every answer carries an ETag, and a poller that sends
it back in ``If-None-Match`` gets a 304 without the body while the view is the same, from the
fast answer and from the route alike, after the token and the team were checked; the client's
pollers (``pflkit submit --wait``, ``client.status``) send it."""

from __future__ import annotations

import threading
import time

import httpx

from bench.loadtest import seed
from evaluator import client, crud
from evaluator.api.status_views import StatusViews
from evaluator.core.db import session_scope
from evaluator.tables import Status
from tests.evaluator.conftest import LiveServer

ROUTE = "/api/v1/submissions/{submission_id}"


def _counted(server: LiveServer, code: str) -> float:
    """Status requests answered with ``code`` so far (the request metrics, by route template)."""
    metrics = server.server.config.app.state.metrics
    return metrics.requests.labels("GET", ROUTE, code)._value.get()


def _forget_views(server: LiveServer) -> None:
    """Drop the kept status views: the next request is the route's, which reads the view."""
    server.server.config.app.state.status_views = StatusViews()


def test_an_unchanged_view_is_a_304_from_the_fast_answer_and_from_the_route(settings) -> None:  # type: ignore[no-untyped-def]
    token, submission = seed(settings.db_url)
    with LiveServer(settings) as server:
        url = f"{server.url}/api/v1/submissions/{submission}"
        auth = {"Authorization": f"Bearer {token}"}
        first = httpx.get(url, headers=auth)  # the route's (nothing kept yet)
        tag = first.headers["etag"]
        fast = httpx.get(url, headers={**auth, "If-None-Match": tag})  # kept: the fast answer
        _forget_views(server)
        routed = httpx.get(url, headers={**auth, "If-None-Match": tag})  # the route's again
        weak = httpx.get(url, headers={**auth, "If-None-Match": f'"other", W/{tag}'})
        star = httpx.get(url, headers={**auth, "If-None-Match": "*"})
        stale = httpx.get(url, headers={**auth, "If-None-Match": '"0123456789abcdef01234567"'})
        assert _counted(server, "304") == 4 and _counted(server, "200") == 2
    assert first.status_code == 200 and first.json()["status"] == "finished"
    assert tag.startswith('"') and tag.endswith('"') and len(tag) == 26
    assert first.headers["cache-control"] == "no-cache, private"
    for answer in (fast, routed, weak, star):
        assert answer.status_code == 304 and answer.content == b""
        assert answer.headers["etag"] == tag
        assert answer.headers["cache-control"] == "no-cache, private"
        assert "content-type" not in answer.headers
    # The 304s of the fast answer and of the route carry the same headers, security's included.
    drop = ("date", "server")
    assert {k: v for k, v in fast.headers.items() if k not in drop} == {
        k: v for k, v in routed.headers.items() if k not in drop
    }
    assert stale.status_code == 200 and stale.content == first.content
    assert stale.headers["etag"] == tag


def test_a_change_gives_the_new_view_and_a_new_etag(settings) -> None:  # type: ignore[no-untyped-def]
    token, submission = seed(settings.db_url)
    with session_scope(settings.db_url) as session:
        organiser = crud.create_team(session, name="org", organiser=True)[1]
    with LiveServer(settings) as server:
        url = f"{server.url}/api/v1/submissions/{submission}"
        auth = {"Authorization": f"Bearer {token}"}
        before = httpx.get(url, headers=auth)
        full = httpx.get(url, headers={"Authorization": f"Bearer {organiser}"})
        rescored = httpx.post(f"{url}/rescore", headers={"Authorization": f"Bearer {organiser}"})
        assert rescored.status_code == 202
        after = httpx.get(url, headers={**auth, "If-None-Match": before.headers["etag"]})
        again = httpx.get(url, headers={**auth, "If-None-Match": after.headers["etag"]})
    assert after.status_code == 200 and after.json()["status"] == "queued"
    assert after.headers["etag"] != before.headers["etag"]
    # The ETag is the body's: the organiser's view (full precision) has its own when it differs.
    assert (full.headers["etag"] == before.headers["etag"]) == (full.content == before.content)
    # A queued view (with its wait for a worker) is the route's, conditional all the same.
    assert again.status_code == 304 and again.content == b""


def test_the_etag_opens_nothing_the_token_does_not(settings) -> None:  # type: ignore[no-untyped-def]
    token, submission = seed(settings.db_url)
    with session_scope(settings.db_url) as session:
        other = crud.create_team(session, name="other")[1]
    with LiveServer(settings) as server:
        url = f"{server.url}/api/v1/submissions/{submission}"
        tag = httpx.get(url, headers={"Authorization": f"Bearer {token}"}).headers["etag"]
        foreign = httpx.get(url, headers={"Authorization": f"Bearer {other}", "If-None-Match": tag})
        _forget_views(server)
        foreign_routed = httpx.get(
            url, headers={"Authorization": f"Bearer {other}", "If-None-Match": tag}
        )
        unknown = httpx.get(url, headers={"Authorization": "Bearer nope", "If-None-Match": tag})
        anonymous = httpx.get(url, headers={"If-None-Match": tag})
    assert foreign.status_code == foreign_routed.status_code == 404
    assert unknown.status_code == anonymous.status_code == 401
    for answer in (foreign, foreign_routed, unknown, anonymous):
        assert "etag" not in answer.headers


def _queued(database_url: str) -> tuple[str, str]:
    """A team and one queued submission (no worker runs): (token, submission id)."""
    with session_scope(database_url) as session:
        team, token = crud.create_team(session, name="waiting")
        submission_id = crud.reserve_submission(
            session, team_id=team.id, quota=10, track=1, method="fedavg",
            metadata={"track": 1, "method": "fedavg"},
        ).id  # fmt: skip
    with session_scope(database_url) as session:
        crud.transition(
            session, submission_id=submission_id, from_status=Status.RECEIVED,
            to_status=Status.QUEUED,
        )  # fmt: skip
    return token, submission_id


def _finish(database_url: str, submission_id: str) -> None:
    """Score the queued submission as a worker would (claim, then finished with results)."""
    with session_scope(database_url) as session:
        crud.claim(session, submission_id=submission_id, worker="test", lease_seconds=60)
        crud.transition(
            session, submission_id=submission_id, from_status=Status.SCORING,
            to_status=Status.FINISHED, lease_owner="test",
            values={"anls": 0.5, "accuracy": 0.4, "total_bytes": 10, "bytes_up": 5,
                    "bytes_down": 5, "rounds": 1,
                    "per_round": [{"round": 0, "up": 5, "down": 5, "total": 10, "clients": 2,
                                   "messages": 4}]},
        )  # fmt: skip


def test_the_clients_pollers_revalidate(settings) -> None:  # type: ignore[no-untyped-def]
    token, submission = _queued(settings.db_url)
    with LiveServer(settings) as server:
        result: dict = {}
        waiter = threading.Thread(
            target=lambda: result.update(
                client.wait(submission, server=server.url, token=token, timeout=60, interval=0.05)
            )
        )
        waiter.start()
        deadline = time.monotonic() + 30
        while _counted(server, "304") < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        unchanged = _counted(server, "304")
        _finish(settings.db_url, submission)
        waiter.join(timeout=60)
        # `pflkit status`'s client: the second call in a process revalidates the first.
        before_status = _counted(server, "304")
        first = client.status(submission, server=server.url, token=token)
        second = client.status(submission, server=server.url, token=token)
        revalidated = _counted(server, "304") - before_status
    assert unchanged >= 5  # the queued view did not change while pflkit submit --wait polled it
    assert not waiter.is_alive() and result["status"] == "finished" and result["anls"] == 0.5
    assert first == second == result
    assert revalidated == 1  # the second call's answer was a 304; its record, the first's
