"""The leaderboard's views are cached per board version: fresh right after a change commits."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from bench.seed_leaderboard import add_submission
from evaluator import crud
from evaluator.core.db import session_factory, session_scope
from evaluator.tables import Status
from leaderboard import views
from leaderboard.cache import VersionedCache
from leaderboard.routes import pages

VIEWS = ("/leaderboard", "/api/v1/leaderboard?track=1", "/api/v1/leaderboard.csv",
         "/leaderboard/plots/track1.png")  # fmt: skip


def _ranked_ids(url: str) -> list[str]:
    return [r["id"] for r in httpx.get(url + "/api/v1/leaderboard?track=1").json()["ranked"]]


def test_unchanged_board_is_built_once(served_factory) -> None:  # type: ignore[no-untyped-def]
    served = served_factory()
    first = {path: httpx.get(served.url + path).content for path in VIEWS}
    builds = views._cache.builds
    again = {path: httpx.get(served.url + path).content for path in VIEWS}
    assert views._cache.builds == builds  # every view came from the cache
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


def test_concurrent_misses_share_one_build() -> None:
    cache = VersionedCache()
    started, release = threading.Event(), threading.Event()
    calls: list[int] = []

    def build() -> str:
        calls.append(1)
        started.set()
        release.wait(10)
        return "view"

    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(cache.get, "key", build) for _ in range(8)]
        assert started.wait(10)
        time.sleep(0.2)  # the other seven reach the cache and wait for the build
        release.set()
        assert [f.result(timeout=10) for f in futures] == ["view"] * 8
    assert calls == [1]
    assert cache.builds == 1


def test_a_failed_build_is_not_cached() -> None:
    cache = VersionedCache()

    def fail() -> str:
        raise RuntimeError("database gone")

    with pytest.raises(RuntimeError, match="database gone"):
        cache.get("key", fail)
    assert cache.get("key", lambda: "view") == "view"
    assert cache.builds == 1


def test_the_warmer_builds_a_read_page_before_the_next_reader(served_factory) -> None:  # type: ignore[no-untyped-def]
    from tests.leaderboard.conftest import THRESHOLD

    served = served_factory()
    assert "zeta" not in httpx.get(served.url + "/leaderboard").text  # read: kept warm from now
    with session_factory(served.db_url)() as session:
        add_submission(session, team="zeta", track=1, method="late", anls=0.99, accuracy=0.9,
                       total_bytes=10, bytes_up=5, bytes_down=5, rounds=1)  # fmt: skip
        version = crud.board_version(session)
    page_key = (served.db_url, version, ((1, THRESHOLD),), ("leaderboard.html", False))
    deadline = time.monotonic() + 20
    while page_key not in views._cache and time.monotonic() < deadline:  # no request meanwhile
        time.sleep(0.05)
    assert page_key in views._cache
    builds = views._cache.builds
    assert "zeta" in httpx.get(served.url + "/leaderboard").text
    assert views._cache.builds == builds  # the reader found the new page built


def test_the_public_page_lists_the_newest_unranked_and_counts_all(
    served_factory, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    served = served_factory()
    monkeypatch.setattr(pages, "MAX_UNRANKED_SHOWN", 1)
    track1 = httpx.get(served.url + "/api/v1/leaderboard?track=1").json()["unranked"]
    assert len(track1) == 2
    page = httpx.get(served.url + "/leaderboard").text
    table = page[page.index('id="track1-unranked"') :].split("</table>")[0]
    assert table.count("<tr data-id=") == 1
    assert track1[-1]["id"] in table  # the newest
    assert track1[0]["id"] not in table
    assert "2 not ranked (the newest 1 below" in page
    assert all(u["id"] in httpx.get(served.url + "/api/v1/leaderboard.csv").text for u in track1)
