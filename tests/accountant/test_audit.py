"""The one-run audit bound (Steinke, Nasr and Jagielski 2023) against values computed from the
paper's statement independently: exact binomial sums with math.comb, the closed form of the
all-correct case without delta, and the statement's max over i written as differences of tails.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from accountant.audit import (
    epsilon_lower_bound,
    guess_counts,
    guess_plans,
    one_run_audit,
    p_value,
    reconstruction_audit,
    roc_auc,
    tpr_at_fpr,
)
from accountant.audit_fdp import gdp_epsilon, mu_lower_bound


def _tail(r: int, v: int, q: float) -> float:
    """P[Binomial(r, q) >= v] by exact summation (no scipy)."""
    return math.fsum(math.comb(r, j) * q**j * (1 - q) ** (r - j) for j in range(max(v, 0), r + 1))


def _statement(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    """The theorem as stated: f(v) + 2 m delta max_{i=1..v} (f(v - i) - f(v)) / i, capped at 1."""
    q = math.exp(epsilon) / (math.exp(epsilon) + 1)
    f = _tail(r, v, q)
    slope = max(((_tail(r, v - i, q) - f) / i for i in range(1, v + 1)), default=0.0)
    return min(f + 2 * m * delta * slope, 1.0)


@pytest.mark.parametrize(
    ("m", "r", "v", "epsilon", "delta"),
    [(1000, 100, 100, 2.0, 1e-5), (1000, 100, 80, 1.0, 1e-5), (50, 50, 40, 0.5, 1e-3),
     (200, 40, 30, 1.5, 0.0), (10, 10, 10, 0.0, 1e-5), (1000, 600, 600, 5.0, 1e-5),
     (30, 6, 3, 0.2, 0.01)],
)  # fmt: skip
def test_p_value_is_the_statement(m, r, v, epsilon, delta):
    assert p_value(m, r, v, epsilon, delta) == pytest.approx(
        _statement(m, r, v, epsilon, delta), rel=1e-9, abs=1e-15
    )


@pytest.mark.parametrize("r", [5, 10, 20, 50, 100, 500])
def test_all_correct_without_delta_has_a_closed_form(r):
    # v = r and delta = 0: p = q^r, so the bound is logit(alpha^(1/r)).
    q = 0.05 ** (1 / r)
    assert epsilon_lower_bound(1000, r, r, 0.0, 0.05) == pytest.approx(
        math.log(q / (1 - q)), abs=1e-6
    )


def test_the_bound_is_where_the_p_value_crosses_alpha():
    for m, r, v, delta in [(1000, 600, 600, 1e-5), (100, 50, 45, 1e-5), (60, 30, 27, 1e-4)]:
        bound = epsilon_lower_bound(m, r, v, delta, 0.05)
        assert bound > 0
        assert p_value(m, r, v, bound, delta) < 0.05 <= _statement(m, r, v, bound + 1e-5, delta)


def test_more_delta_lowers_the_bound_and_chance_gives_none():
    bounds = [epsilon_lower_bound(1000, 100, 100, delta) for delta in (0.0, 1e-5, 1e-3, 1e-2)]
    assert bounds == sorted(bounds, reverse=True) and len(set(bounds)) == 4
    # half right is what a coin gets: no bound
    assert epsilon_lower_bound(100, 50, 25, 1e-5) == 0.0


def test_perfect_guesses_of_50_canaries_support_about_two():
    # 25 in, 25 out, all correct; 8 plans (k in and k out, or k in alone, k in 2, 5, 12, 25)
    # each at level 0.05 / 16 (both analyses run, each at half the level): the best is all 50
    coins = [True] * 25 + [False] * 25
    scores = [1.0 + i for i in range(25)] + [-1.0 - i for i in range(25)]
    result = one_run_audit(scores, coins, delta=1e-5)
    assert guess_counts(50) == (2, 5, 12, 25)
    assert guess_plans(50) == ((2, 2), (5, 5), (12, 12), (25, 25), (2, 0), (5, 0), (12, 0), (25, 0))
    assert (result.guesses, result.correct, result.plans) == (50, 50, 8)
    assert result.epsilon_lower_bound == pytest.approx(
        epsilon_lower_bound(50, 50, 50, 1e-5, 0.05 / 16), abs=1e-9
    )
    assert 2.0 < result.epsilon_lower_bound < 2.5
    assert (result.auc, result.tpr_at_fpr) == (1.0, 1.0)


def test_the_test_keeps_its_level_under_a_dp_guesser():
    # An epsilon-DP guesser (randomised response at epsilon 1, the worst case of the theorem):
    # the audit claims more than epsilon 1 in at most 5% of runs.
    rng = random.Random(7)
    q = math.exp(1) / (1 + math.exp(1))
    above = 0
    runs = 400
    for _ in range(runs):
        coins = [rng.random() < 0.5 for _ in range(100)]
        signal = [(c if rng.random() < q else not c) for c in coins]
        scores = [s + rng.random() * 1e-3 for s in signal]
        above += one_run_audit(scores, coins, delta=0.0).epsilon_lower_bound > 1.0
    assert above / runs <= 0.05


def test_in_guesses_alone_when_the_bottom_is_mixed():
    # 30 in-canaries, of which the top 20 are marked; the 10 unmarked ones sit among the 30
    # out-canaries at the bottom: k in and k out guesses lose there, k in alone does not.
    rng = random.Random(3)
    coins = [True] * 30 + [False] * 30
    scores = [10.0 + i for i in range(20)] + [rng.random() for _ in range(40)]
    result = one_run_audit(scores, coins, delta=1e-5)
    assert (result.guesses_in, result.guesses_out, result.correct) == (15, 0, 15)
    assert result.epsilon_lower_bound == pytest.approx(
        epsilon_lower_bound(60, 15, 15, 1e-5, 0.05 / 16), abs=1e-9
    )


def test_auc_and_tpr_on_hand_values():
    scores = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.0]
    coins = [True, True, False, True, False, True, False, False, True, False]
    # pairs (in, out) with in > out: 5 in x 5 out = 25 pairs
    pairs = list(zip(scores, coins, strict=True))
    wins = sum(s > t for s, c in pairs if c for t, d in pairs if not d)
    assert roc_auc(scores, coins) == pytest.approx(wins / 25)
    # one out-canary of five allowed above the threshold (fpr 0.2): threshold 0.5
    assert tpr_at_fpr(scores, coins, 0.2) == (pytest.approx(3 / 5), pytest.approx(1 / 5))
    # fpr below 1/5 resolves to 0: only in-canaries above the best out-canary (0.7)
    assert tpr_at_fpr(scores, coins, 0.1) == (pytest.approx(2 / 5), 0.0)
    assert roc_auc([1, 1], [True, False]) == 0.5


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="v <= r <= m"):
        p_value(10, 20, 5, 1.0, 1e-5)
    with pytest.raises(ValueError, match="at least two"):
        one_run_audit([1.0], [True], delta=1e-5)
    with pytest.raises(ValueError, match="finite"):
        one_run_audit([1.0, np.nan], [True, False], delta=1e-5)
    with pytest.raises(ValueError, match="same length"):
        one_run_audit([1.0, 2.0], [True], delta=1e-5)


def test_reconstruction_guesses_all_right_reach_the_f_dp_ceiling():
    # 100 canaries of 10 candidates, the true one always far ahead: all 100 guesses right, and
    # the bound is the f-DP analysis's for (100, 100, 100, k = 10) at 0.05 / 5 (five counts).
    rng = np.random.default_rng(0)
    secrets = rng.integers(0, 10, 100)
    scores = rng.normal(size=(100, 10))
    scores[np.arange(100), secrets] += 50
    result = reconstruction_audit(scores, secrets, delta=1e-5)
    assert (result.kind, result.candidates, result.plans) == ("reconstruction", 10, 5)
    assert (result.fdp_guesses, result.fdp_correct, result.auc) == (100, 100, 1.0)
    mu = mu_lower_bound(100, 100, 100, alpha=0.05 / 5, candidates=10)
    assert result.verdict_epsilon == pytest.approx(gdp_epsilon(mu, delta=1e-5))
    assert result.verdict_epsilon > 9.5  # measured 9.549; membership's ceiling is 5.669
    assert result.verdict_analysis == "fdp" and result.epsilon_lower_bound == 0.0


def test_reconstruction_keeps_its_level_under_a_gdp_guesser():
    # A mu-GDP release of the secret (the true candidate's score shifted by mu / sqrt 2: the
    # two neighbours differ in two coordinates) claims more than its epsilon in at most 5% of
    # runs, and a guesser that learned nothing claims nothing.
    rng = np.random.default_rng(3)
    mu, delta = 1.0, 1e-5
    claimed = gdp_epsilon(mu, delta=delta)
    above = 0
    runs = 100
    for _ in range(runs):
        secrets = rng.integers(0, 10, 100)
        scores = rng.normal(size=(100, 10))
        scores[np.arange(100), secrets] += mu / math.sqrt(2)
        above += reconstruction_audit(scores, secrets, delta=delta).verdict_epsilon > claimed
    assert above / runs <= 0.05
    blind = reconstruction_audit(rng.normal(size=(100, 10)), rng.integers(0, 10, 100), delta=delta)
    assert blind.verdict_epsilon == 0.0


def test_reconstruction_bad_input_is_refused():
    with pytest.raises(ValueError, match="m x k table"):
        reconstruction_audit([1.0, 2.0], [0, 1], delta=1e-5)
    with pytest.raises(ValueError, match="candidate index in 0..1"):
        reconstruction_audit([[1.0, 2.0], [0.0, 1.0]], [0, 2], delta=1e-5)
    with pytest.raises(ValueError, match="finite"):
        reconstruction_audit([[1.0, float("nan")], [0.0, 1.0]], [0, 1], delta=1e-5)
