"""Failed authentication is throttled per client address (429 + Retry-After); participants see
their own scores to 4 decimals; every response carries the security headers."""

from __future__ import annotations

import httpx
import pytest

from evaluator import crud
from evaluator.core.db import session_scope
from evaluator.tables import Status
from tests.evaluator.conftest import LiveServer
from tests.evaluator.factories import small_safetensors
from tests.evaluator.test_api import upload


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_wrong_bearer_tokens_are_throttled(settings, teams: dict) -> None:  # type: ignore[no-untyped-def]
    strict = settings.model_copy(
        update={"auth_failures_allowed": 5, "auth_failure_window_seconds": 30}
    )
    with LiveServer(strict) as server, httpx.Client(base_url=server.url) as client:
        codes = [
            client.get("/api/v1/submissions", headers={"Authorization": f"Bearer pfl_guess{i}"})
            for i in range(8)
        ]
        assert [c.status_code for c in codes] == [401] * 5 + [429] * 3
        assert 1 <= int(codes[-1].headers["retry-after"]) <= 30
        assert "too many failed authentications" in codes[-1].json()["detail"]
        # During the lockout even a correct token is answered 429: guessing gains nothing.
        good = client.get("/api/v1/submissions", headers={"Authorization": f"Bearer {teams['alpha']}"})
        assert good.status_code == 429
        login = client.post("/leaderboard/organiser/login", data={"token": "x"})
        assert login.status_code in (404, 429)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_organiser_login_guesses_are_throttled(settings, teams: dict) -> None:  # type: ignore[no-untyped-def]
    from pflkit.app import create_app

    strict = settings.model_copy(update={"auth_failures_allowed": 3})
    with LiveServer(strict, app=create_app(strict)) as server:
        codes = [
            httpx.post(server.url + "/leaderboard/organiser/login", data={"token": f"guess{i}"})
            for i in range(5)
        ]
        assert [c.status_code for c in codes] == [403] * 3 + [429] * 2
        assert int(codes[-1].headers["retry-after"]) >= 1


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_participants_see_four_decimals_organisers_full_precision(
    live_server: LiveServer, teams: dict, settings, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    model = small_safetensors(tmp_path / "m.safetensors").read_bytes()
    sid = upload(live_server.url, teams["alpha"], model=model).json()["id"]
    with session_scope(settings.db_url) as session:
        crud.claim(session, submission_id=sid, worker="w", lease_seconds=60)
    with session_scope(settings.db_url) as session:
        crud.transition(session, submission_id=sid, from_status=Status.SCORING,
                        to_status=Status.FINISHED, lease_owner="w",
                        values={"anls": 0.27245207767871965, "accuracy": 0.1, "anls_in": 0.123456789,
                                "per_round": [{"round": r, "up": 1, "down": 1, "total": 2,
                                               "clients": 1, "messages": 2} for r in range(5000)]})  # fmt: skip
    url = f"{live_server.url}/api/v1/submissions/{sid}"
    own = httpx.get(url, headers={"Authorization": f"Bearer {teams['alpha']}"})
    assert own.json()["anls"] == 0.2725 and own.json()["results"]["anls_in"] == 0.1235
    assert len(own.json()["results"]["per_round"]) == 1000 and len(own.content) < 200_000
    full = httpx.get(url, headers={"Authorization": f"Bearer {teams['org']}"}).json()
    assert full["anls"] == 0.27245207767871965
    assert own.headers["x-content-type-options"] == "nosniff"
    assert "default-src 'none'" in own.headers["content-security-policy"]
