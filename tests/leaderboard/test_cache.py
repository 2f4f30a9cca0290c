"""The leaderboard's views are cached per board version: fresh right after a change commits."""

from __future__ import annotations

import httpx

from evaluator import crud
from evaluator.core.db import session_factory, session_scope
from evaluator.models import Status
from leaderboard import web
from leaderboard.seed import add_submission

VIEWS = ("/leaderboard", "/api/v1/leaderboard?track=1", "/api/v1/leaderboard.csv",
         "/leaderboard/plots/track1.png")  # fmt: skip


def _ranked_ids(url: str) -> list[str]:
    return [r["id"] for r in httpx.get(url + "/api/v1/leaderboard?track=1").json()["ranked"]]


def test_unchanged_board_is_built_once(served_factory) -> None:  # type: ignore[no-untyped-def]
    served = served_factory()
    first = {path: httpx.get(served.url + path).content for path in VIEWS}
    builds = web._cache.builds
    again = {path: httpx.get(served.url + path).content for path in VIEWS}
    assert web._cache.builds == builds  # every view came from the cache
    assert again == first


def test_a_score_shows_right_after_it_lands(served_factory) -> None:  # type: ignore[no-untyped-def]
    served = served_factory()
    before = _ranked_ids(served.url)
    assert "zeta" not in httpx.get(served.url + "/leaderboard").text
    # A worker's way: the upload is queued, claimed, then finished with its results.
    with session_factory(served.db_url)() as session:
        new = add_submission(session, team="zeta", track=1, method="tiny", status=Status.QUEUED)
    with session_scope(served.db_url) as session:
        assert crud.claim(session, submission_id=new, worker="w", lease_seconds=60)
    assert new not in _ranked_ids(served.url)
    with session_scope(served.db_url) as session:
        assert crud.transition(
            session, submission_id=new, from_status=Status.SCORING, to_status=Status.FINISHED,
            lease_owner="w", values={"anls": 0.99, "accuracy": 0.9, "total_bytes": 10,
                                     "bytes_up": 5, "bytes_down": 5, "rounds": 1},
        )  # fmt: skip
    assert _ranked_ids(served.url) == [new, *before]
    assert "zeta" in httpx.get(served.url + "/leaderboard").text
    assert new in httpx.get(served.url + "/api/v1/leaderboard.csv").text


def test_an_organiser_action_changes_the_cached_ranking(served_factory) -> None:  # type: ignore[no-untyped-def]
    from tests.leaderboard.conftest import ORGANISER_TOKEN

    served = served_factory()
    top = _ranked_ids(served.url)[0]
    assert top in httpx.get(served.url + "/leaderboard").text
    response = httpx.post(
        f"{served.url}/api/v1/leaderboard/submissions/{top}/disqualify",
        params={"reason": "copied"},
        headers={"Authorization": f"Bearer {ORGANISER_TOKEN}"},
    )
    assert response.status_code == 200
    assert top not in _ranked_ids(served.url)
    assert "disqualified: copied" in httpx.get(served.url + "/leaderboard").text
