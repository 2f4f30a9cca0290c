"""Which epsilon the audit's bound is compared with: the declared mechanism's, by the PLD
accountant, when it is tighter than the declared epsilon (real accountant runs)."""

from __future__ import annotations

import pytest

import accountant
from accountant.audit_fdp import claim_mu, gdp_mu
from evaluator.canary_audit import CLAIM_BASES, audited_claim, contradicted

DECLARATION = {
    "epsilon": 1.1, "delta": 1e-5, "noise_multiplier": 1.145, "clipping_norm": 0.5,
    "rounds": 5, "clients": 10, "clients_per_round": 2, "providers_per_round": 50,
    "min_providers": 400, "sampling": "poisson", "analysis": "competition", "unit": "provider",
}  # fmt: skip


def test_the_mechanism_is_tested_when_the_pld_accountant_is_tighter() -> None:
    report = accountant.verify(DECLARATION)
    assert report.passed
    pld = report.epsilon["pld"]
    assert 0 < pld < DECLARATION["epsilon"]
    tested, basis = audited_claim(DECLARATION["epsilon"], report.to_dict())
    assert (tested, basis) == (pytest.approx(pld), "mechanism")
    assert "PLD" in CLAIM_BASES[basis]
    # the Gaussian curve through it is the declared mechanism's mu (claim_mu)
    mechanism_mu = claim_mu(
        noise_multiplier=DECLARATION["noise_multiplier"], sample_rate=report.sample_rate,
        steps=report.steps, delta=DECLARATION["delta"],
    )  # fmt: skip
    assert gdp_mu(tested, delta=DECLARATION["delta"]) == pytest.approx(mechanism_mu, rel=1e-6)
    # a bound between the two contradicts the mechanism, not the declared epsilon
    between = (pld + DECLARATION["epsilon"]) / 2
    assert contradicted(tested, between) and not contradicted(DECLARATION["epsilon"], between)


def test_the_declared_epsilon_stays_without_a_tighter_mechanism() -> None:
    report = accountant.verify(DECLARATION).to_dict()
    assert audited_claim(None, report) == (None, None)
    assert audited_claim(1.0, None) == (1.0, "declared")
    assert audited_claim(1.0, {"epsilon": {"rdp": 0.9}}) == (1.0, "declared")
    # a declaration below its own mechanism's PLD epsilon (it fails verification) keeps its own
    assert audited_claim(0.1, report) == (0.1, "declared")
    # a report that is not what the accountant writes changes nothing
    for odd in ({"epsilon": "x"}, {"epsilon": {"pld": "0.5"}}, {"epsilon": {"pld": float("nan")}}):
        assert audited_claim(1.0, odd) == (1.0, "declared")
