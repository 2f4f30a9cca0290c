"""The leaderboard shows the official logger's byte count beside the exact one that ranks.

Real server and SQLite database: a track-1 submission with both figures and one without the
official count (scored before the column existed, or not declared) in the JSON, the CSV, the
ranking page and the detail page; the ranking follows the exact count only.
"""

from __future__ import annotations

import io

import httpx
import pandas as pd

EXACT, OFFICIAL = 1_000, 30_800_000


def _add(db_url: str, **kwargs) -> str:  # type: ignore[no-untyped-def]
    from bench.seed_leaderboard import add_submission
    from evaluator.core.db import session_factory

    with session_factory(db_url)() as session:
        return add_submission(session, **kwargs)


def test_both_counts_are_shown_and_the_exact_one_ranks(served_factory) -> None:  # type: ignore[no-untyped-def]
    served = served_factory()
    declared = _add(served.db_url, team="official", track=1, method="declared", anls=0.95,
                    total_bytes=EXACT, official_logger_total_bytes=OFFICIAL, rounds=1,
                    messages=2, per_round=[])  # fmt: skip
    older = _add(served.db_url, team="older", track=1, method="undeclared", anls=0.95,
                 total_bytes=EXACT + 1, rounds=1, messages=2, per_round=[])  # fmt: skip

    ranked = httpx.get(served.url + "/api/v1/leaderboard", params={"track": 1}).json()["ranked"]
    by_id = {entry["id"]: entry for entry in ranked}
    assert [entry["id"] for entry in ranked][:2] == [declared, older]
    assert (by_id[declared]["total_bytes"], by_id[declared]["official_logger_total_bytes"]) == (
        EXACT, OFFICIAL)
    assert by_id[older]["official_logger_total_bytes"] is None

    csv = httpx.get(served.url + "/api/v1/leaderboard.csv", params={"track": 1}).text
    frame = pd.read_csv(io.StringIO(csv), dtype=str, keep_default_na=False).set_index("id")
    assert frame.loc[declared, "official_logger_total_bytes"] == str(OFFICIAL)
    assert frame.loc[older, "official_logger_total_bytes"] == ""

    board = httpx.get(served.url + "/leaderboard").text
    assert ">official logger</th>" in board
    assert f'title="{OFFICIAL} bytes">30.8 MB</td>' in board

    page = httpx.get(f"{served.url}/leaderboard/submissions/{declared}").text
    assert 'id="official-logger-bytes"' in page and f"({OFFICIAL} bytes)" in page
    other = httpx.get(f"{served.url}/leaderboard/submissions/{older}").text
    assert 'id="official-logger-bytes"' not in other
