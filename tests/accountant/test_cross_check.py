"""PRV and PLD agree with each other and stay below the RDP upper bound."""

from __future__ import annotations

import pytest

from accountant.cross_check import estimate_epsilons

DELTA = 1e-5


@pytest.mark.parametrize(
    ("sigma", "q", "steps"),
    [
        (1.145, 0.025, 5),
        (0.637, 0.025, 5),
        (0.468, 0.025, 5),
        (1.145, 0.025, 50),
        (1.145, 0.125, 5),
        (1.0, 0.01, 1000),
        (0.8, 1.0, 3),
    ],
)
def test_tight_accountants_agree_below_rdp(sigma, q, steps):
    estimates = estimate_epsilons(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=DELTA)
    rdp, prv, pld = (estimates.epsilon[name] for name in ("rdp", "prv", "pld"))
    assert prv <= rdp and pld <= rdp
    # PRV reports its upper bound (estimate + 0.01); PLD rounds pessimistically on a 1e-3 grid.
    assert abs(prv - pld) <= 0.02 + 0.005 * rdp
    # RDP is loose but not absurdly so in this range.
    assert rdp <= 2.0 * pld + 0.1
    assert estimates.skipped == {}


def test_competition_cross_checks_are_pinned():
    estimates = estimate_epsilons(noise_multiplier=1.145, sample_rate=0.025, steps=5, delta=DELTA)
    assert estimates.epsilon["prv"] == pytest.approx(0.5369, abs=1e-3)
    assert estimates.epsilon["pld"] == pytest.approx(0.5268, abs=1e-3)
    assert estimates.rdp_order == 9.8


def test_cross_checks_are_skipped_outside_their_range():
    estimates = estimate_epsilons(
        noise_multiplier=0.05, sample_rate=0.025, steps=10_000, delta=DELTA
    )
    assert estimates.epsilon["prv"] is None and estimates.epsilon["pld"] is None
    assert "noise multiplier" in estimates.skipped["prv"]
    assert estimates.epsilon["rdp"] > 50
