"""verify(): the competition's published configuration and the notes a reader needs."""

from __future__ import annotations

import json

import pytest

from accountant.verification import verify


@pytest.mark.parametrize(
    ("budget", "sigma", "epsilon", "passed"),
    [(1, 1.145, 1.0057, False), (4, 0.637, 3.9959, True), (8, 0.468, 8.0039, False)],
)
def test_competition_claims(competition, budget, sigma, epsilon, passed):
    report = verify({**competition, "epsilon": budget, "noise_multiplier": sigma})
    assert round(report.epsilon["rdp"], 4) == epsilon
    assert report.passed is passed and report.within_budget is passed
    assert report.margin == pytest.approx(budget - report.epsilon["rdp"])
    assert (report.margin > 0) is passed
    assert abs(report.margin) < 0.01  # over or under by a hair
    assert report.authoritative == "rdp" and report.sample_rate == 0.025 and report.steps == 5
    assert (
        report.epsilon["prv"] < report.epsilon["rdp"]
        and report.epsilon["pld"] < report.epsilon["rdp"]
    )
    assert (report.rdp_delta <= 1e-5) is passed
    assert any("authoritative" in note for note in report.notes)


def test_fifty_rounds_config(competition):
    report = verify({**competition, "rounds": 50})
    assert round(report.epsilon["rdp"], 2) == 1.34
    assert not report.passed


def test_competition_analysis_is_compared_with_strict(competition):
    report = verify({**competition, "epsilon": 4, "noise_multiplier": 0.637})
    assert report.passed
    assert report.strict["sample_rate"] == 0.125
    assert report.strict["epsilon"] > 4 and not report.strict["within_budget"]
    assert any(
        "weaker than the strict analysis" in note and "would not hold" in note
        for note in report.notes
    )
    strict = verify({**competition, "epsilon": 4, "noise_multiplier": 0.637, "analysis": "strict"})
    assert strict.sample_rate == 0.125 and not strict.passed
    assert strict.epsilon["rdp"] == report.strict["epsilon"]


def test_fixed_size_sampling_is_not_covered(competition):
    report = verify({**competition, "epsilon": 4, "noise_multiplier": 0.637, "sampling": "fixed"})
    assert report.within_budget and not report.covered and not report.passed
    assert any("not covered by the Poisson" in note for note in report.notes)


def test_non_integer_rounds_fail_with_a_note(competition):
    report = verify({**competition, "epsilon": 8, "noise_multiplier": 1.145, "rounds": 4.5})
    assert report.steps == 5 and report.within_budget and not report.passed
    assert any("not an integer" in note for note in report.notes)


def test_tighter_accountants_do_not_change_the_verdict(competition):
    report = verify(competition)
    assert report.epsilon["prv"] < 1 and report.epsilon["pld"] < 1 and not report.passed
    assert any("tighter accountants are within budget" in note for note in report.notes)


def test_report_is_strict_json_and_readable(competition):
    report = verify({**competition, "method": "dp-lora"})
    data = json.loads(report.to_json())
    assert data["passed"] is False and data["declaration"]["noise_multiplier"] == 1.145
    assert set(data["epsilon"]) == {"rdp", "prv", "pld"}
    text = report.to_text()
    assert text.startswith("FAIL: declared epsilon 1 at delta 1e-05; RDP epsilon 1.0057")
    assert "margin -0.0057" in text and "ignored unknown fields: method" in text
    assert "(authoritative)" in text and "(cross-check)" in text


def test_no_privacy_is_still_serialisable(competition):
    report = verify(
        {
            **competition,
            "noise_multiplier": 0.01,
            "clients_per_round": 10,
            "providers_per_round": 400,
        }
    )
    assert not report.passed and report.sample_rate == 1.0
    assert report.epsilon["prv"] is None and report.skipped["prv"]
    json.loads(report.to_json())
