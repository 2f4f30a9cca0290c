"""The status endpoint's fast answers (evaluator.api.status_views.fast_status): the same bytes as
the route's, kept across changes of other submissions, counted under the route's template."""

from __future__ import annotations

import gc

import httpx
import pytest
from sqlalchemy import event

from bench.loadtest import seed
from tests.evaluator.conftest import LiveServer

ROUTE = "/api/v1/submissions/{submission_id}"


def _headers(response: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k not in ("date", "server")}


def test_the_fast_answer_is_the_routes_and_is_counted_under_its_template(settings, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from evaluator.api.routes import submissions as route

    routed_bodies = []
    kept_body = route._kept_body
    monkeypatch.setattr(route, "_kept_body", lambda *a: routed_bodies.append(1) or kept_body(*a))
    token, submission = seed(settings.db_url)
    with LiveServer(settings) as server:
        url = f"{server.url}/api/v1/submissions/{submission}"
        auth = {"Authorization": f"Bearer {token}"}
        routed = httpx.get(url, headers=auth)  # nothing kept yet: the route reads the view
        fast = [httpx.get(url, headers=auth) for _ in range(3)]  # kept: answered before routing
        counted = server.server.config.app.state.metrics.requests.labels("GET", ROUTE, "200")
        assert counted._value.get() == 4
    assert routed.status_code == 200
    assert len(routed_bodies) == 1  # only the first request reached the route
    for answer in fast:
        assert answer.status_code == 200
        assert answer.content == routed.content
        assert _headers(answer) == _headers(routed)  # security headers included


def test_a_change_to_another_submission_keeps_the_view(settings) -> None:  # type: ignore[no-untyped-def]
    token, submission = seed(settings.db_url)
    with LiveServer(settings) as server:
        url = f"{server.url}/api/v1/submissions/{submission}"
        auth = {"Authorization": f"Bearer {token}"}
        first = httpx.get(url, headers=auth)
        seed(settings.db_url)  # another team's submission: received, queued, scoring, finished
        statements: list[str] = []
        engine = server.server.config.app.state.sessions.kw["bind"]
        listener = lambda *args: statements.append(args[2])  # noqa: E731
        event.listen(engine, "before_cursor_execute", listener)
        again = httpx.get(url, headers=auth)
        event.remove(engine, "before_cursor_execute", listener)
    assert again.content == first.content
    assert len(statements) == 1  # the caller and the change marks; the view was kept
    assert "UNION ALL" in statements[0]


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_pflkit_serve_freezes_the_start_up_objects(settings) -> None:  # type: ignore[no-untyped-def]
    try:
        with LiveServer(settings.model_copy(update={"gc_freeze": True})) as server:
            assert httpx.get(f"{server.url}/healthz").status_code == 200
            assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
