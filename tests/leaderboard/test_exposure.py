"""What the pages and exports expose: CSV cells, precision, plot labels, headers, the organiser
session cookie, and the throttle on failed authentication (real server, real database)."""

from __future__ import annotations

import io

import httpx
import pandas as pd
from sqlalchemy import select, text

from tests.leaderboard.conftest import ORGANISER_TOKEN

FORMULAS = ["=HYPERLINK(\"http://x\",\"y\")", "+1+2", "-3+4", "@SUM(A1)", "\tTAB"]


def _add(db_url: str, **kwargs) -> str:  # type: ignore[no-untyped-def]
    from bench.seed_leaderboard import add_submission
    from evaluator.core.db import session_factory

    with session_factory(db_url)() as session:
        return add_submission(session, **kwargs)


def test_csv_neutralises_formulas_and_keeps_integers(served_factory) -> None:  # type: ignore[no-untyped-def]
    served = served_factory()
    for i, method in enumerate(FORMULAS):
        _add(served.db_url, team="formula", track=1, method=method, anls=0.9 + i / 1000,
             total_bytes=67_136 + i, rounds=1, messages=2, per_round=[])  # fmt: skip
    body = httpx.get(served.url + "/api/v1/leaderboard.csv?all=true").text
    frame = pd.read_csv(io.StringIO(body), dtype=str, keep_default_na=False)
    methods = set(frame.method)
    for method in FORMULAS:
        assert "'" + method in methods
    for cell in frame.to_numpy().ravel():
        assert not cell.startswith(("=", "+", "@", "\t")), cell
        assert not (cell.startswith("-") and not cell.lstrip("-").replace(".", "").isdigit()), cell
    assert "67136" in set(frame.total_bytes) and "67136.0" not in body
    assert set(frame["rank"]) <= {str(n) for n in range(1, 100)} | {""}


def test_public_scores_have_four_decimals_organisers_full(served_factory) -> None:  # type: ignore[no-untyped-def]
    served = served_factory()
    sid = _add(served.db_url, team="precise", track=1, method="m", anls=0.97245207767871965,
               anls_in=0.9, anls_out=0.8, accuracy=0.51234567, total_bytes=10, rounds=1,
               messages=2, per_round=[])  # fmt: skip
    public = httpx.get(served.url + "/api/v1/leaderboard?track=1").json()["ranked"]
    entry = next(e for e in public if e["id"] == sid)
    assert entry["anls"] == 0.9725 and entry["accuracy"] == 0.5123
    csv = httpx.get(served.url + "/api/v1/leaderboard.csv").text
    assert "0.9725" in csv and "0.97245207" not in csv
    page = httpx.get(f"{served.url}/leaderboard/submissions/{sid}").text
    assert "0.9725" in page and "0.97245207" not in page
    organiser = {"Authorization": f"Bearer {ORGANISER_TOKEN}"}
    listing = httpx.get(served.url + "/api/v1/leaderboard/organiser", headers=organiser).json()
    assert next(r for r in listing["submissions"] if r["id"] == sid)["anls"] == 0.97245207767871965


def test_mathtext_team_name_does_not_break_the_plot(served_factory) -> None:  # type: ignore[no-untyped-def]
    from evaluator.core.db import session_factory

    served = served_factory()
    sid = _add(served.db_url, team="plain", track=1, method="m", anls=0.99, total_bytes=5,
               rounds=1, messages=2, per_round=[])  # fmt: skip
    # A name registered before names were validated: rename the team in the database.
    with session_factory(served.db_url)() as session:
        session.execute(text("UPDATE teams SET name = :n WHERE name = 'plain'"),
                        {"n": "$\\frac{a}$"})  # fmt: skip
        session.commit()
    image = httpx.get(served.url + "/leaderboard/plots/track1.png")
    assert image.status_code == 200 and image.content[:4] == b"\x89PNG"
    assert sid in httpx.get(served.url + "/leaderboard").text


def test_security_headers_on_pages_and_api(served) -> None:  # type: ignore[no-untyped-def]
    for path in ("/leaderboard", "/api/v1/leaderboard?track=1", "/healthz",
                 "/leaderboard/plots/track2.png", "/leaderboard/organiser"):  # fmt: skip
        headers = httpx.get(served.url + path).headers
        assert "default-src 'none'" in headers["content-security-policy"], path
        assert "frame-ancestors 'none'" in headers["content-security-policy"]
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["x-frame-options"] == "DENY"
    docs = httpx.get(served.url + "/docs").headers["content-security-policy"]
    assert "cdn.jsdelivr.net" in docs


def test_session_cookie_is_opaque_secure_and_expires(served_factory) -> None:  # type: ignore[no-untyped-def]
    from evaluator.core.db import session_factory
    from evaluator.tables import OrganiserSession

    served = served_factory()
    login = httpx.post(served.url + "/leaderboard/organiser/login",
                       data={"token": ORGANISER_TOKEN})  # fmt: skip
    assert login.status_code == 303
    set_cookie = login.headers["set-cookie"]
    assert ORGANISER_TOKEN not in set_cookie
    for flag in ("HttpOnly", "Secure", "SameSite=strict", "Max-Age=28800"):
        assert flag.lower() in set_cookie.lower(), set_cookie
    value = login.cookies["pflkit_session"]
    page = httpx.get(served.url + "/leaderboard/organiser", cookies={"pflkit_session": value})
    assert page.status_code == 200 and "<tr data-id=" in page.text
    with session_factory(served.db_url)() as session:
        stored = session.scalars(select(OrganiserSession.id_hash)).all()
        assert value not in stored and len(stored) == 1
        session.execute(text("UPDATE organiser_sessions SET expires_at = '2000-01-01 00:00:00'"))
        session.commit()
    expired = httpx.get(served.url + "/leaderboard/organiser", cookies={"pflkit_session": value})
    assert expired.status_code == 401  # the sign-in form again
    fresh = httpx.post(served.url + "/leaderboard/organiser/login",
                       data={"token": ORGANISER_TOKEN}).cookies["pflkit_session"]  # fmt: skip
    httpx.post(served.url + "/leaderboard/organiser/logout", cookies={"pflkit_session": fresh})
    after = httpx.get(served.url + "/leaderboard/organiser", cookies={"pflkit_session": fresh})
    assert after.status_code == 401


def test_public_detail_page_hides_reasons(served) -> None:  # type: ignore[no-untyped-def]
    url = f"{served.url}/leaderboard/submissions/{served.ids['eps-rejected']}"
    public = httpx.get(url).text
    assert "rejected" in public and "tensor &#39;x&#39;" not in public and "tensor 'x'" not in public
    organiser = httpx.get(url, headers={"Authorization": f"Bearer {ORGANISER_TOKEN}"}).text
    assert "tensor &#39;x&#39; has shape" in organiser
