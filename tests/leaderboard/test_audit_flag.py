"""The privacy audit on the pages: a claim below the audit's lower bound is flagged
"contradicted by audit" on the leaderboard, the organiser view and the submission page; the
audit of a track-1 submission shows on its page; a skipped audit says why."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import httpx
import pytest

from tests.leaderboard.conftest import ORGANISER_TOKEN, T0, Served, start_server


def _audit(bound: float, contradicted: bool | None, snj: float | None = None) -> dict:
    """The audit columns; with ``snj``, a report of both analyses whose f-DP bound decided
    (reports written before issue 33 have the SNJ bound alone)."""
    report = {"epsilon_lower_bound": bound, "canaries": 100, "canaries_in": 48, "guesses": 20,
              "correct": 20, "delta": 1e-5, "attack": "secret"}  # fmt: skip
    if snj is not None:
        report.update(epsilon_lower_bound=snj, fdp_epsilon_lower_bound=bound, fdp_guesses=40,
                      fdp_correct=39, verdict_epsilon=bound, verdict_analysis="fdp",
                      verdict_note="f-DP with Gaussian curves: assumes a Gaussian-shaped curve.")  # fmt: skip
    return {"audit_epsilon": bound, "audit_auc": 0.91, "audit_tpr": 0.6, "audit_fpr": 0.1,
            "audit_seconds": 3.5, "audit_contradicted": contradicted, "audit_report": report}  # fmt: skip


def _reconstruction_audit(bound: float) -> dict:
    """The audit columns of reconstruction canaries: the f-DP k-ary bound alone."""
    columns = _audit(bound, None, snj=0.0)
    columns["audit_report"].update(kind="reconstruction", candidates=10, fdp_guesses=25,
                                   fdp_correct=11, guesses=0, correct=0)  # fmt: skip
    return columns


def _tested(columns: dict) -> dict:
    """The columns with the claim the worker tested: the mechanism's PLD epsilon."""
    from evaluator.canary_audit import CLAIM_BASES

    columns["audit_report"]["claim_tested"] = {
        "epsilon": 0.527, "declared_epsilon": 1.0, "basis": CLAIM_BASES["mechanism"],
    }  # fmt: skip
    return columns


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    from bench.seed_leaderboard import add_submission
    from evaluator.core.db import session_factory

    url, db_url, thread, server = start_server(tmp_path_factory.mktemp("lb-audit"))
    claim = {"anls": 0.6, "total_bytes": 1000, "delta": 1e-5, "privacy_verified": True,
             "privacy_report": {"verified": True, "accountant": {}, "log_mismatches": []}}  # fmt: skip
    plan = [
        ("liar", "alpha", 2, {**claim, "epsilon": 1.0, **_tested(_audit(1.84, True, snj=0.93))}),
        ("honest", "beta", 2, {**claim, "epsilon": 1.0, **_audit(0.0, False)}),
        ("open", "gamma", 1, {"anls": 0.5, "total_bytes": 10, **_audit(2.31, None)}),
        ("reconstruction", "epsilon", 1, {"anls": 0.5, "total_bytes": 10,
                                          **_reconstruction_audit(1.21)}),
        ("skipped", "delta", 1, {"anls": 0.5, "total_bytes": 10,
                                 "audit_report": {"skipped": "the benchmark has no canary providers"}}),
    ]  # fmt: skip
    ids = {}
    with session_factory(db_url)() as session:
        for minute, (key, team, track, results) in enumerate(plan):
            ids[key] = add_submission(session, team=team, track=track, method=key,
                                      created_at=T0 + dt.timedelta(minutes=minute), **results)  # fmt: skip
    try:
        yield Served(url=url, db_url=db_url, ids=ids)
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def _row(page: str, submission_id: str) -> str:
    start = page.index(f'data-id="{submission_id}"')
    return page[start : page.index("</tr>", start)]


def test_the_leaderboard_flags_the_contradicted_claim_only(audited: Served) -> None:
    page = httpx.get(audited.url + "/leaderboard").text
    assert "contradicted by audit" in _row(page, audited.ids["liar"])
    assert "contradicted by audit" not in _row(page, audited.ids["honest"])
    api = httpx.get(audited.url + "/api/v1/leaderboard", params={"track": 2}).json()
    flags = {e["id"]: e["audit_contradicted"] for e in api["ranked"]}
    assert flags == {audited.ids["liar"]: True, audited.ids["honest"]: False}


def test_the_organiser_view_shows_bounds_and_the_flag(audited: Served) -> None:
    page = httpx.get(audited.url + "/leaderboard/organiser",
                     headers={"Authorization": f"Bearer {ORGANISER_TOKEN}"}).text  # fmt: skip
    liar, honest, track1 = (_row(page, audited.ids[k]) for k in ("liar", "honest", "open"))
    assert "1.84" in liar and "contradicted by audit" in liar
    assert "0.00" in honest and "contradicted" not in honest
    assert "2.31" in track1 and "contradicted" not in track1


def test_submission_pages_show_the_audit(audited: Served) -> None:
    page = httpx.get(f"{audited.url}/leaderboard/submissions/{audited.ids['liar']}").text
    assert "&epsilon; &ge; <strong>1.840</strong>" in page
    assert "contradicted by audit" in page and "AUC 0.910" in page
    # both analyses' bounds, and which one the verdict used with what it assumes
    assert "Jagielski bound &epsilon; &ge; 0.930" in page
    assert "Gaussian curves) &epsilon; &ge; 1.840 (39 of 40 guesses right)" in page
    assert "The verdict uses the f-DP bound: f-DP with Gaussian curves" in page
    # the epsilon the bound was compared with: the declared mechanism's, by PLD
    assert "compared with &epsilon; = 0.527: the declared mechanism" in page
    assert "PLD accountant" in page and "(declared &epsilon; = 1)" in page
    page = httpx.get(f"{audited.url}/leaderboard/submissions/{audited.ids['open']}").text
    assert "&epsilon; &ge; <strong>2.310</strong>" in page and "contradicted" not in page
    assert "privacy-audit-analyses" not in page  # an older report: the SNJ bound alone
    assert "privacy-audit-claim" not in page  # no claim (track 1)
    page = httpx.get(f"{audited.url}/leaderboard/submissions/{audited.ids['reconstruction']}").text
    assert "11 of 25 secrets guessed right on 100 reconstruction canaries of 10 candidates" in page
    assert "does not apply" in page and "Jagielski bound" not in page
    page = httpx.get(f"{audited.url}/leaderboard/submissions/{audited.ids['skipped']}").text
    assert "Not audited: the benchmark has no canary providers." in page
