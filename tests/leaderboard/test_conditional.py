"""The public views' ETag, 304 and gzip (leaderboard.responses), on the real server on localhost,
and their fast answers (leaderboard.fast_reads): the same bytes as the route's."""

from __future__ import annotations

import gzip
import random

import httpx
import pytest

from bench.seed_leaderboard import add_submission
from evaluator.core.db import session_factory
from evaluator.tables import Status
from leaderboard import views
from leaderboard.responses import View, accepts_gzip, not_modified

VIEWS = ("/leaderboard", "/api/v1/leaderboard?track=1", "/api/v1/leaderboard?track=2&all=true",
         "/api/v1/leaderboard.csv", "/leaderboard/plots/track1.png")  # fmt: skip
PLAIN = {"Accept-Encoding": "identity"}


def _get(url: str, **headers: str) -> httpx.Response:
    return httpx.get(url, headers={**PLAIN, **headers})


def _headers(response: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k not in ("date", "server")}


@pytest.mark.parametrize("path", VIEWS)
def test_a_view_answers_304_to_its_etag(served, path: str) -> None:  # type: ignore[no-untyped-def]
    full = _get(served.url + path)
    assert full.status_code == 200
    etag = full.headers["etag"]
    assert full.headers["cache-control"] == "no-cache"
    again = _get(served.url + path, **{"If-None-Match": etag})
    assert again.status_code == 304
    assert again.content == b""
    assert again.headers["etag"] == etag
    assert "content-security-policy" in again.headers  # the security headers as on any answer
    for other in ('"not-this-one"', f'W/"x", W/{etag}', "*"):
        expected = 200 if other == '"not-this-one"' else 304
        assert _get(served.url + path, **{"If-None-Match": other}).status_code == expected


def test_a_score_changes_the_etag_of_its_track_only(served_factory) -> None:  # type: ignore[no-untyped-def]
    served = served_factory()
    track1, track2 = (served.url + "/api/v1/leaderboard?track=1",
                      served.url + "/api/v1/leaderboard?track=2")  # fmt: skip
    tags = {url: _get(url).headers["etag"] for url in (track1, track2)}
    with session_factory(served.db_url)() as session:
        new = add_submission(session, team="zeta", track=1, method="late", anls=0.99,
                             accuracy=0.9, total_bytes=10, bytes_up=5, bytes_down=5, rounds=1)  # fmt: skip
    changed = _get(track1, **{"If-None-Match": tags[track1]})
    assert changed.status_code == 200  # the poller gets the new ranking at once
    assert changed.headers["etag"] != tags[track1]
    assert new in [entry["id"] for entry in changed.json()["ranked"]]
    # the board moved, but not track 2's ranking: its pollers still get 304
    assert _get(track2, **{"If-None-Match": tags[track2]}).status_code == 304
    with session_factory(served.db_url)() as session:
        add_submission(session, team="eta", track=2, method="queued", status=Status.QUEUED)
    assert _get(track1, **{"If-None-Match": changed.headers["etag"]}).status_code == 304


def test_gzip_once_per_version_for_clients_that_accept_it(served) -> None:  # type: ignore[no-untyped-def]
    url = served.url + "/leaderboard"
    plain = _get(url)
    with httpx.stream("GET", url, headers={"Accept-Encoding": "gzip"}) as response:
        raw = b"".join(response.iter_raw())
        zipped = response
    assert zipped.headers["content-encoding"] == "gzip"
    assert zipped.headers["vary"] == "Accept-Encoding"
    assert int(zipped.headers["content-length"]) == len(raw) < len(plain.content)
    assert gzip.decompress(raw) == plain.content
    assert zipped.headers["etag"] != plain.headers["etag"]  # one ETag per representation
    assert "content-encoding" not in plain.headers
    refused = _get(url, **{"Accept-Encoding": "gzip;q=0, identity"})
    assert "content-encoding" not in refused.headers
    # a client that revalidates with either representation's tag gets a 304
    for tag in (plain.headers["etag"], zipped.headers["etag"]):
        assert _get(url, **{"If-None-Match": tag}).status_code == 304


@pytest.mark.parametrize("path", VIEWS)
def test_the_fast_answer_is_the_routes(served_factory, monkeypatch, path: str) -> None:  # type: ignore[no-untyped-def]
    routed = []
    served_view = views.served_view

    async def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        routed.append(path)
        return await served_view(*args, **kwargs)

    monkeypatch.setattr(views, "served_view", counted)
    served = served_factory()
    for encoding in ("identity", "gzip"):
        headers = {"Accept-Encoding": encoding}
        first = httpx.get(served.url + path, headers=headers)  # the route's answer
        fast = [httpx.get(served.url + path, headers=headers) for _ in range(2)]
        for answer in fast:
            assert answer.status_code == first.status_code == 200
            assert answer.content == first.content
            assert _headers(answer) == _headers(first)
    assert len(routed) == 1  # the first request built the view; every other was answered fast


def test_what_the_fast_answers_leave_to_the_routes(served) -> None:  # type: ignore[no-untyped-def]
    # an unknown track, a repeated parameter, a value the routes refuse: the routes' answers
    assert httpx.get(served.url + "/api/v1/leaderboard?track=9").status_code == 422
    assert httpx.get(served.url + "/api/v1/leaderboard?track=1&track=2").status_code == 200
    assert httpx.get(served.url + "/api/v1/leaderboard?track=one").status_code == 422
    assert httpx.get(served.url + "/leaderboard?all=maybe").status_code == 422
    assert httpx.get(served.url + "/api/v1/leaderboard").status_code == 422


def test_conditional_and_encoding_rules() -> None:
    view = View.of(b"x" * 4096)
    assert view.gzipped is not None and gzip.decompress(view.gzipped) == view.body
    assert View.of(b"short").gzipped is None
    assert View.of(random.Random(0).randbytes(4096)).gzipped is None  # not worth it
    assert not_modified(view.etag, view) and not_modified(f"W/{view.gzip_etag}", view)
    assert not_modified(f'"a", {view.etag}', view) and not_modified("*", view)
    assert not not_modified(None, view) and not not_modified('"a"', view)
    assert accepts_gzip("gzip, deflate, br") and accepts_gzip("*")
    assert accepts_gzip("br;q=1.0, gzip;q=0.8")
    assert not accepts_gzip("gzip;q=0") and not accepts_gzip("identity") and not accepts_gzip(None)
    assert not accepts_gzip("*;q=0.5, gzip;q=0")
