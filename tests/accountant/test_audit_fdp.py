"""The f-DP analysis of a one-run audit (Mahloujifar, Melis and Chaudhuri 2025) against two
independent implementations run once as oracles, outside the kit, and against its own
statement: monotonicity, the p-value and mu* as the edges of the rejection region, and the
test's level under mechanisms that are exactly mu-GDP.

Oracles (values pasted below, computed in a separate environment with dp-accounting 0.6.0,
numpy 2.4.6 and scipy 1.17.1):

- BINARY: google-deepmind/jax_privacy at commit 8967688c26d46f3b74bfdfe61ef1f984b887abab,
  ``jax_privacy/auditing.py``, ``_epsilon_one_run_fdp(0.0, m, r, v, alpha, delta)`` (the
  private function behind ``CanaryScoreAuditor.epsilon_one_run_fdp``; a Brent search on epsilon
  with xtol 1e-6, hence the tolerance 2e-6).
- K_ARY: facebookresearch/PrivacyGuard at commit fb9c26ca70f5de4a145a8d01a36cf0415851ccb9,
  ``privacy_guard/analysis/mia/fdp_analysis_node.py``, the decisions of
  ``FDPAnalysisNode.audit_rh_with_cap`` (k candidates, noise 1 / mu) bisected on mu to 1e-10 by
  the oracle script (the node's own search walks a grid of noises 0.01 apart); epsilon at delta
  1e-5 of that mu by dp-accounting's ``get_epsilon_gaussian(1 / mu, 1e-5)``.
- GAUSSIAN: dp-accounting 0.6.0 ``get_epsilon_gaussian(sigma, delta)`` (Balle and Wang 2018,
  the analytic Gaussian mechanism, which is 1/sigma-GDP).
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accountant.audit import ANALYSES, epsilon_lower_bound, one_run_audit
from accountant.audit_fdp import (
    claim_mu,
    clt_mu,
    fdp_epsilon_lower_bound,
    fdp_p_value,
    gaussian_blow_up_inverse,
    gdp_delta,
    gdp_epsilon,
    gdp_mu,
    mu_lower_bound,
    recursion_excess,
    rejects,
)

# (m, r, v, alpha, delta, epsilon) from jax_privacy (see the module docstring)
BINARY = [
    (100, 100, 100, 0.05, 1e-5, 8.216186103950786),
    (100, 100, 100, 0.05 / 8, 1e-5, 5.669179420526894),
    (200, 200, 200, 0.05 / 8, 1e-5, 6.785880749923444),
    (500, 500, 500, 0.05 / 8, 1e-5, 8.189161730111415),
    (1000, 1000, 1000, 0.05 / 8, 1e-5, 9.215912186954387),
    (100, 50, 45, 0.05, 1e-5, 2.7930206042037895),
    (100, 20, 18, 0.05 / 8, 1e-5, 0.7179652560916029),
    (1000, 100, 80, 0.05, 1e-5, 1.402214673838583),
    (1000, 600, 600, 0.05, 1e-5, 10.514892069894595),
    (60, 30, 27, 0.05, 1e-4, 2.027812955451895),
    (50, 50, 40, 0.05, 1e-3, 1.2252243000381167),
    (200, 40, 30, 0.05, 1e-6, 0.8225267145290182),
    (100, 10, 10, 0.05, 1e-5, 1.6258921198974436),
    (1000, 1000, 700, 0.05, 1e-5, 1.371980050043179),
    (100, 100, 60, 0.05, 1e-5, 0.07900512536494847),
    (100, 50, 30, 0.05, 1e-5, 0.0),
    (30, 6, 3, 0.05, 1e-2, 0.0),
    (1000, 500, 260, 0.05, 1e-5, 0.0),
]

# (m, r, v, k, alpha, mu*, epsilon at delta 1e-5) from PrivacyGuard (see the module docstring)
K_ARY = [
    (100, 100, 100, 10, 0.05 / 8, 1.8381972601637244, 9.014834020894174),
    (100, 100, 100, 10, 0.05, 2.3337356015690602, 12.110531562278634),
    (100, 50, 40, 10, 0.05, 1.1747049706755206, 5.279927218481482),
    (100, 100, 30, 10, 0.05, 0.4308129483122938, 1.688453736942648),
    (200, 100, 60, 4, 0.05, 0.5066358321041295, 2.0226592146156905),
    (100, 100, 100, 2, 0.05 / 8, 1.248054207128007, 5.669179336164116),
    (500, 200, 120, 3, 0.05, 0.37112949775787507, 1.4312017714192757),
    (100, 20, 20, 100, 0.05, 2.0854329171124846, 10.527118622265945),
    (1000, 1000, 400, 10, 0.05 / 8, 0.5341253648514199, 2.145783096242533),
]

# (sigma, delta, epsilon) of the Gaussian mechanism, from dp-accounting
GAUSSIAN = [
    (1.0, 1e-5, 4.377178095681137),
    (0.5, 1e-5, 9.997256146434315),
    (2.0, 1e-6, 2.254084650219736),
    (0.8, 1e-3, 4.1454473430439815),
    (4.0, 1e-5, 0.9263415039982288),
]


@pytest.mark.parametrize(("m", "r", "v", "alpha", "delta", "expected"), BINARY)
def test_binary_bounds_equal_jax_privacy(m, r, v, alpha, delta, expected):
    assert fdp_epsilon_lower_bound(m, r, v, delta=delta, alpha=alpha) == pytest.approx(
        expected, abs=2e-6
    )


@pytest.mark.parametrize(("m", "r", "v", "k", "alpha", "mu", "epsilon"), K_ARY)
def test_k_ary_bounds_equal_privacy_guard(m, r, v, k, alpha, mu, epsilon):
    found = mu_lower_bound(m, r, v, alpha=alpha, candidates=k)
    assert found == pytest.approx(mu, abs=1e-8)
    assert fdp_epsilon_lower_bound(m, r, v, delta=1e-5, alpha=alpha, candidates=k) == (
        pytest.approx(epsilon, abs=1e-7)
    )


@pytest.mark.parametrize(("sigma", "delta", "epsilon"), GAUSSIAN)
def test_gaussian_curve_equals_dp_accounting(sigma, delta, epsilon):
    assert gdp_epsilon(1 / sigma, delta=delta) == pytest.approx(epsilon, rel=1e-9)
    assert gdp_mu(epsilon, delta=delta) == pytest.approx(1 / sigma, rel=1e-9)
    assert gdp_delta(epsilon, mu=1 / sigma) == pytest.approx(delta, rel=1e-7)


def test_blow_up_inverse_is_the_gaussian_trade_off():
    # 1 - G_mu(1 - x) with G_mu(a) = Phi(Phi^-1(1 - a) - mu); Phi from math.erf
    def phi(z: float) -> float:
        return 0.5 * (1 + math.erf(z / math.sqrt(2)))

    for mu in (0.0, 0.3, 1.0, 2.5):
        for z in (-3.0, -1.0, 0.0, 0.7, 2.0):
            assert gaussian_blow_up_inverse(phi(z), mu=mu) == pytest.approx(phi(z - mu), abs=1e-12)
    assert gaussian_blow_up_inverse(0.0, mu=1.0) == 0.0
    assert gaussian_blow_up_inverse(1.0, mu=1.0) == 1.0


@settings(max_examples=60, deadline=None)
@given(
    m=st.integers(10, 300),
    share=st.floats(0.05, 1.0),
    accuracy=st.floats(0.5, 1.0),
    k=st.sampled_from([2, 3, 10]),
    alpha=st.sampled_from([0.01, 0.05, 0.05 / 8]),
)
def test_mu_star_and_the_p_value_are_the_edges_of_the_rejection(m, share, accuracy, k, alpha):
    r = max(1, round(share * m))
    v = min(r, round(accuracy * r))
    mu = mu_lower_bound(m, r, v, alpha=alpha, candidates=k)
    if mu > 0:
        assert rejects(m, r, v, mu=mu * (1 - 1e-6), alpha=alpha, candidates=k)
        assert fdp_p_value(m, r, v, mu=mu * (1 - 1e-6), candidates=k) <= alpha
    assert not rejects(m, r, v, mu=mu + 1e-6, alpha=alpha, candidates=k)
    assert fdp_p_value(m, r, v, mu=mu + 1e-6, candidates=k) >= alpha * (1 - 1e-6)
    # more right guesses, or a looser level, never lower the bound
    if v < r:
        assert mu_lower_bound(m, r, v + 1, alpha=alpha, candidates=k) >= mu
    assert mu_lower_bound(m, r, v, alpha=min(2 * alpha, 0.5), candidates=k) >= mu
    # the same right guesses among more candidates are worth more
    assert mu_lower_bound(m, r, v, alpha=alpha, candidates=k + 1) >= mu


def test_chance_gives_nothing_and_perfection_grows_with_canaries():
    assert mu_lower_bound(100, 100, 50, alpha=0.05) == 0.0
    assert mu_lower_bound(100, 100, 10, alpha=0.05, candidates=10) == 0.0
    assert rejects(100, 10, 0, mu=0.0, alpha=0.05) is False
    ceilings = [fdp_epsilon_lower_bound(m, m, m, delta=1e-5, alpha=0.05 / 8)
                for m in (100, 200, 500, 1000)]  # fmt: skip
    assert ceilings == sorted(ceilings) and len(set(ceilings)) == 4


def test_fdp_has_more_power_than_snj_on_perfect_guesses():
    for m in (50, 100, 200, 500, 1000):
        snj = epsilon_lower_bound(m, m, m, 1e-5, 0.05 / 8)
        assert fdp_epsilon_lower_bound(m, m, m, delta=1e-5, alpha=0.05 / 8) > 1.7 * snj


def test_excess_sign_is_the_decision():
    assert recursion_excess(100, 100, 100, mu=1.0, level=0.05) > 0
    assert recursion_excess(100, 100, 100, mu=3.0, level=0.05) <= 0
    # without right guesses the recursion does not move: tau r / m - r / m
    assert recursion_excess(100, 40, 0, mu=0.5, level=0.05) == pytest.approx(0.05 * 0.4 - 0.4)


def _binary_rejections(mu: float, tested: float, runs: int, seed: int) -> float:
    """Share of runs of a mu-GDP membership mechanism (score = mu * coin + N(0, 1)) in which
    the top 25 "in" and bottom 25 "out" guesses of 100 canaries reject tested-GDP at 0.05."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(runs):
        coins = rng.random(100) < 0.5
        order = np.argsort(-(mu * coins + rng.standard_normal(100)))
        correct = int(coins[order[:25]].sum() + (~coins[order[75:]]).sum())
        hits += rejects(100, 50, correct, mu=tested, alpha=0.05)
    return hits / runs


def test_level_under_an_exactly_gaussian_mechanism_and_power_against_a_false_claim():
    # the truth is 1-GDP: claiming it is rejected in at most 5% of runs (the bound is not
    # tight, far fewer); claiming 0.3-GDP is rejected most of the time
    assert _binary_rejections(1.0, 1.0, 2000, 0) <= 0.05
    assert _binary_rejections(1.0, 0.3, 300, 1) >= 0.5


def test_level_for_k_ary_reconstruction():
    # k = 10 candidates; the output is k Gaussians, the secret's coordinate shifted by mu/sqrt 2
    # (moving the secret moves two coordinates: L2 distance mu, so exactly mu-GDP); the guess
    # is the argmax, made on the 50 canaries with the largest margin
    rng = np.random.default_rng(5)
    mu, k, m, hits, runs = 1.5, 10, 100, 0, 1000
    for _ in range(runs):
        secrets = rng.integers(0, k, m)
        out = rng.standard_normal((m, k))
        out[np.arange(m), secrets] += mu / math.sqrt(2)
        top = np.sort(out, axis=1)
        chosen = np.argsort(-(top[:, -1] - top[:, -2]))[:50]
        correct = int((out[chosen].argmax(axis=1) == secrets[chosen]).sum())
        hits += rejects(m, 50, correct, mu=mu, alpha=0.05, candidates=k)
    assert hits / runs <= 0.05


def test_clt_mu_is_near_the_accountant_for_many_small_steps():
    from accountant.analysis.pld import compute_epsilon

    mu = clt_mu(noise_multiplier=1.0, sample_rate=0.01, steps=10_000)
    assert mu == pytest.approx(0.01 * math.sqrt(10_000 * (math.e - 1)))
    pld = compute_epsilon(noise_multiplier=1.0, sample_rate=0.01, steps=10_000, delta=1e-5)
    assert gdp_epsilon(mu, delta=1e-5) == pytest.approx(pld, rel=0.1)


def test_claim_mu_is_exact_for_full_participation():
    # q = 1: T Gaussian steps of noise sigma compose to exactly sqrt(T) / sigma-GDP (Dong, Roth
    # and Su 2022, Corollary 3.3); the PLD accountant's pessimistic grid costs about 1e-6
    for sigma, steps in [(2.3, 10), (1.0, 1), (4.0, 25)]:
        mu = claim_mu(noise_multiplier=sigma, sample_rate=1.0, steps=steps, delta=1e-5)
        assert mu == pytest.approx(math.sqrt(steps) / sigma, rel=1e-5)
    # subsampling makes the claim tighter than the full-participation one
    assert claim_mu(noise_multiplier=1.0, sample_rate=0.1, steps=10, delta=1e-5) < math.sqrt(10)


def test_the_audit_reports_both_and_the_verdict_takes_the_larger():
    coins = [True] * 50 + [False] * 50
    scores = [1.0 + i for i in range(50)] + [-1.0 - i for i in range(50)]
    result = one_run_audit(scores, coins, delta=1e-5)
    # perfect guesses of 100 canaries at 0.05 / 8 (one analysis alone): the oracle's value
    assert fdp_epsilon_lower_bound(100, 100, 100, delta=1e-5, alpha=0.05 / 8) == pytest.approx(
        5.669179420526894, abs=2e-6
    )
    # the audit runs both analyses on 8 plans, each at 0.05 / 16: a little lower
    assert result.fdp_epsilon_lower_bound == pytest.approx(
        fdp_epsilon_lower_bound(100, 100, 100, delta=1e-5, alpha=0.05 / 16), abs=1e-9
    )
    assert 5.0 < result.fdp_epsilon_lower_bound < 5.669
    assert (result.fdp_guesses, result.fdp_correct) == (100, 100)
    assert result.epsilon_lower_bound == pytest.approx(
        epsilon_lower_bound(100, 100, 100, 1e-5, 0.05 / 16), abs=1e-9
    )
    assert result.verdict_epsilon == result.fdp_epsilon_lower_bound
    assert (result.verdict_analysis, result.verdict_note) == ("fdp", ANALYSES["fdp"])
    assert result.as_dict()["fdp_mu_lower_bound"] == pytest.approx(
        mu_lower_bound(100, 100, 100, alpha=0.05 / 16), abs=1e-8
    )
    # a pure claim (delta 0) has no Gaussian reading: the verdict is the SNJ bound
    pure = one_run_audit(scores, coins, delta=0.0)
    assert pure.fdp_epsilon_lower_bound == 0.0
    assert (pure.verdict_analysis, pure.verdict_epsilon) == ("snj", pure.epsilon_lower_bound)


def test_a_weak_attack_contradicts_nothing():
    rng = random.Random(11)
    coins = [rng.random() < 0.5 for _ in range(100)]
    result = one_run_audit([rng.random() for _ in range(100)], coins, delta=1e-5)
    assert result.verdict_epsilon < 0.5


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="v <= r <= m"):
        mu_lower_bound(10, 20, 5)
    with pytest.raises(ValueError, match="2 candidates"):
        rejects(10, 5, 5, mu=1.0, alpha=0.05, candidates=1)
    with pytest.raises(ValueError, match="alpha"):
        rejects(10, 5, 5, mu=1.0, alpha=1.5)
    with pytest.raises(ValueError, match="delta"):
        gdp_epsilon(1.0, delta=0.0)
    with pytest.raises(ValueError, match="sigma"):
        clt_mu(noise_multiplier=0.0, sample_rate=0.1, steps=10)
