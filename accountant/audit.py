"""One-run privacy auditing (Steinke, Nasr and Jagielski 2023, "Privacy Auditing with One (1)
Training Run", arXiv 2305.08846).

m canaries are each put into the training data on an independent fair coin. After training,
an auditor scores every canary, guesses "in" for the k highest scores and "out" for the k
lowest, and abstains on the rest: r = 2k guesses, v of them correct. If the training is
(epsilon, delta)-DP, their main theorem bounds the chance of v or more correct guesses by

    P[correct >= v] <= f(v) + 2 m delta * max_{i = 1..v} (f(v - i) - f(v)) / i,

where f(v) = P[W >= v] for W ~ Binomial(r, e^epsilon / (1 + e^epsilon)) (randomised response
with epsilon is the best any epsilon-DP guesser can do on one coin). That bound is the p-value
of the hypothesis "the training is (epsilon, delta)-DP"; the audit's lower bound is the largest
epsilon that the observed v still rejects at the chosen level (p < 0.05 for 95% confidence).

Choosing k after looking at the scores would invalidate the test. Here the guesses come from a
fixed set of plans declared in advance (:func:`guess_plans`: k "in" and k "out", or k "in"
alone, for k a fixed share of m) and each plan is tested at level alpha / (number of plans)
(Bonferroni): the reported bound is the largest over the plans, and the chance that any of
them rejects a true claim is still at most alpha.

The same guesses are also analysed with the f-DP test of Mahloujifar, Melis and Chaudhuri
(ICML 2025, :mod:`accountant.audit_fdp`), on the same plans at the same levels: it tests the
claim as a Gaussian trade-off curve (mu-GDP with the mu whose curve passes through the claimed
(epsilon, delta)) and has far more power (100 canaries guessed perfectly: close to twice the
bound at delta 1e-5, ``python -m bench.audit_ceiling``). Both bounds are reported; the verdict uses the larger, and
:data:`ANALYSES` says what each assumes. Taking the larger of two tests is itself a choice made
after seeing the guesses, so each analysis runs at half the level (every plan at
alpha / (2 plans)): the chance that either rejects a true claim stays at most alpha. With
delta 0 only the Steinke-Nasr-Jagielski analysis applies and it keeps the whole level.

Reconstruction canaries (:func:`reconstruction_audit`): every canary is trained on, with a
secret drawn uniformly from k candidates; the auditor guesses the secret of the r canaries it
is surest of (the widest margin between its best and second-best candidate) and v guesses are
right. Only the f-DP analysis covers k-ary guesses (the Steinke-Nasr-Jagielski theorem is for
binary coins), so its bound is the verdict's.

Imports nothing of the kit but :mod:`accountant.audit_fdp`, numpy and scipy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats

from accountant.audit_fdp import gdp_epsilon, mu_lower_bound

#: guesses per side, as fractions of the canaries, tried by :func:`one_run_audit` (Bonferroni)
DEFAULT_GUESS_FRACTIONS = (0.05, 0.1, 0.25, 0.5)
#: guesses, as fractions of the canaries, tried by :func:`reconstruction_audit` (Bonferroni)
RECONSTRUCTION_GUESS_FRACTIONS = (0.05, 0.1, 0.25, 0.5, 1.0)
#: search range of the bisection on epsilon (a bound this large needs thousands of guesses)
MAX_EPSILON = 50.0
#: what each analysis's bound assumes of the training (the verdict names the one it used)
ANALYSES = {
    "snj": (
        "Steinke, Nasr and Jagielski 2023 (arXiv 2305.08846): rejects '(epsilon, delta)-DP' for "
        "every epsilon below the bound; assumes only that the training is (epsilon, delta)-DP "
        "for some epsilon."
    ),
    "fdp": (
        "Mahloujifar, Melis and Chaudhuri 2025 (arXiv 2410.22235), f-DP with Gaussian curves: "
        "rejects 'mu-GDP' for every mu below mu*, and the bound is epsilon at the audit's delta "
        "of mu*-GDP; a claim (epsilon, delta) is contradicted when it is read as the Gaussian "
        "curve through (epsilon, delta) (the tight curve of a Gaussian mechanism, and the "
        "central-limit shape of DP-SGD / DP-FedAvg); a mechanism that is (epsilon, delta)-DP "
        "but not Gaussian-shaped is covered by the other analysis only."
    ),
}


def p_value(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    """The chance of ``v`` or more correct guesses out of ``r`` under (epsilon, delta)-DP.

    Args:
        m: canaries, each included on an independent fair coin.
        r: guesses made (abstentions excluded), ``r <= m``.
        v: correct guesses, ``v <= r``.
        epsilon: the hypothesis's epsilon, >= 0.
        delta: the hypothesis's delta, in [0, 1].

    Returns:
        The theorem's bound on that chance, capped at 1.

    Raises:
        ValueError: for counts or parameters out of range.
    """
    if not 0 <= v <= r <= m:
        raise ValueError(f"need 0 <= v <= r <= m, got m={m}, r={r}, v={v}")
    if not epsilon >= 0 or not 0 <= delta <= 1:
        raise ValueError(f"need epsilon >= 0 and 0 <= delta <= 1, got {epsilon}, {delta}")
    q = 1.0 / (1.0 + math.exp(-epsilon))
    tail = float(stats.binom.sf(v - 1, r, q))
    if delta == 0 or v == 0:
        return min(tail, 1.0)
    # (f(v - i) - f(v)) / i = P[v - i <= W <= v - 1] / i for i = 1..v
    below = stats.binom.pmf(np.arange(v - 1, -1, -1), r, q)
    slope = float(np.max(np.cumsum(below) / np.arange(1, v + 1)))
    return min(tail + 2 * m * delta * slope, 1.0)


def epsilon_lower_bound(m: int, r: int, v: int, delta: float, alpha: float = 0.05) -> float:
    """The largest epsilon such that ``v`` correct guesses of ``r`` reject (epsilon, delta)-DP
    at level ``alpha`` (0 when even epsilon 0 is not rejected).

    Args:
        m: canaries.
        r: guesses.
        v: correct guesses.
        delta: the claim's delta.
        alpha: the test's level (0.05: 95% confidence).

    Returns:
        The lower bound, to within 1e-6.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if p_value(m, r, v, 0.0, delta) >= alpha:
        return 0.0
    low, high = 0.0, MAX_EPSILON
    if p_value(m, r, v, high, delta) < alpha:
        return high
    while high - low > 1e-7:
        middle = (low + high) / 2
        if p_value(m, r, v, middle, delta) < alpha:
            low = middle
        else:
            high = middle
    return low


@dataclass(frozen=True)
class AuditResult:
    """What one audit found.

    Attributes:
        epsilon_lower_bound: the largest epsilon the guesses reject at ``1 - alpha`` confidence.
        canaries: m, the canaries scored.
        canaries_in: how many were trained on.
        guesses: r of the plan that gave the bound (the first plan's when none rejects).
        correct: v of that plan.
        guesses_in: its "in" guesses (the highest scores).
        guesses_out: its "out" guesses (the lowest scores).
        plans: how many guess plans were tried (each at level alpha / plans, halved again
            when both analyses run: see the module docstring).
        delta: the delta tested.
        alpha: the overall level.
        auc: area under the ROC curve of the scores against the coins.
        tpr_at_fpr: true-positive rate at ``fpr`` (largest threshold whose false-positive rate
            is at most ``fpr``).
        fpr: the false-positive rate of ``tpr_at_fpr`` (at least one out-canary's worth).
        fdp_epsilon_lower_bound: the f-DP analysis's bound (Gaussian curves) on the same plans
            at the same levels (:mod:`accountant.audit_fdp`).
        fdp_mu_lower_bound: mu*, the largest mu whose mu-GDP the guesses reject.
        fdp_guesses, fdp_correct, fdp_guesses_in, fdp_guesses_out: the plan that gave it.
        verdict_epsilon: the larger of the two bounds: the one a claim is compared with.
        verdict_analysis: which analysis gave it (a key of :data:`ANALYSES`; "snj" on ties).
        verdict_note: what that analysis assumes, in words.
        kind: ``membership`` (binary coins) or ``reconstruction`` (k-ary secrets; the
            Steinke-Nasr-Jagielski fields are then 0: that analysis is for coins only).
        candidates: k, the values a canary's secret is drawn from (2 for membership).
    """

    epsilon_lower_bound: float
    canaries: int
    canaries_in: int
    guesses: int
    correct: int
    guesses_in: int
    guesses_out: int
    plans: int
    delta: float
    alpha: float
    auc: float
    tpr_at_fpr: float
    fpr: float
    fdp_epsilon_lower_bound: float = 0.0
    fdp_mu_lower_bound: float = 0.0
    fdp_guesses: int = 0
    fdp_correct: int = 0
    fdp_guesses_in: int = 0
    fdp_guesses_out: int = 0
    verdict_epsilon: float = 0.0
    verdict_analysis: str = "snj"
    verdict_note: str = ANALYSES["snj"]
    kind: str = "membership"
    candidates: int = 2

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary."""
        return asdict(self)


def plan_level(alpha: float, plans: int, *, analyses: int = 1) -> float:
    """The level each guess plan is tested at: ``alpha`` shared (Bonferroni) over the plans and
    over the analyses whose largest bound the verdict takes."""
    return alpha / plans / analyses


def guess_counts(m: int, fractions: Sequence[float] = DEFAULT_GUESS_FRACTIONS) -> tuple[int, ...]:
    """The per-side guess counts tried for ``m`` canaries: each fraction of m, at least 1 and
    at most m // 2, without repeats."""
    counts = sorted({min(max(1, round(f * m)), m // 2) for f in fractions})
    return tuple(c for c in counts if c >= 1)


def guess_plans(
    m: int, fractions: Sequence[float] = DEFAULT_GUESS_FRACTIONS
) -> tuple[tuple[int, int], ...]:
    """The (guesses "in", guesses "out") pairs tried for ``m`` canaries: for every count k of
    :func:`guess_counts`, k of each, and k "in" guesses alone (a model trained on only part of
    its data leaves some included canaries unmarked: they then spoil "out" guesses only)."""
    counts = guess_counts(m, fractions)
    return tuple((k, k) for k in counts) + tuple((k, 0) for k in counts)


def one_run_audit(
    scores: Sequence[float],
    included: Sequence[bool],
    *,
    delta: float,
    alpha: float = 0.05,
    fractions: Sequence[float] = DEFAULT_GUESS_FRACTIONS,
    fpr: float = 0.1,
) -> AuditResult:
    """Audit one training run from its canaries' scores and coins.

    Every plan of :func:`guess_plans` (declared before the scores are seen) is tested by both
    analyses, each at level ``alpha`` / (2 x the number of plans) (with ``delta`` 0 only the
    Steinke-Nasr-Jagielski analysis runs, at ``alpha`` / plans); the largest bound is reported,
    for the Steinke-Nasr-Jagielski analysis and for the f-DP one (each its own best plan), and
    the verdict's bound is the larger of the two: a true claim is rejected with chance at most
    ``alpha``.

    Args:
        scores: the attack's score per canary (higher: more likely trained on).
        included: the coin per canary (True: it was in the training data).
        delta: the claim's delta.
        alpha: the level (0.05 for a bound at 95% confidence).
        fractions: per-side guess counts as fractions of the canaries.
        fpr: the false-positive rate at which the true-positive rate is reported.

    Returns:
        The audit's figures.

    Raises:
        ValueError: fewer than two canaries, mismatched lengths or non-finite scores.
    """
    values = np.asarray(scores, dtype=float)
    coins = np.asarray(included, dtype=bool)
    if values.shape != coins.shape or values.ndim != 1:
        raise ValueError("scores and coins must be two lists of the same length")
    if values.size < 2:
        raise ValueError("an audit needs at least two canaries")
    if not np.all(np.isfinite(values)):
        raise ValueError("every score must be finite")
    m = int(values.size)
    # Ties are broken by a fixed order (the canary's index), never by the coin.
    order = np.lexsort((np.arange(m), -values))
    plans = guess_plans(m, fractions)
    gaussian = 0 < delta < 1  # no Gaussian curve is (epsilon, 0)-DP: no f-DP reading
    level = plan_level(alpha, len(plans), analyses=2 if gaussian else 1)
    best = None
    best_fdp = None
    for k_in, k_out in plans:
        correct = int(coins[order[:k_in]].sum() + (~coins[order[m - k_out :]]).sum())
        bound = epsilon_lower_bound(m, k_in + k_out, correct, delta, level)
        if best is None or bound > best[0]:
            best = (bound, k_in, k_out, correct)
        mu = mu_lower_bound(m, k_in + k_out, correct, alpha=level) if gaussian else 0.0
        if best_fdp is None or mu > best_fdp[0]:
            best_fdp = (mu, k_in, k_out, correct)
    assert best is not None and best_fdp is not None
    bound, k_in, k_out, correct = best
    mu, fdp_in, fdp_out, fdp_correct = best_fdp
    fdp_bound = gdp_epsilon(mu, delta=delta) if gaussian else 0.0
    analysis = "fdp" if fdp_bound > bound else "snj"
    tpr, achieved = tpr_at_fpr(values, coins, fpr)
    return AuditResult(
        epsilon_lower_bound=bound,
        canaries=m,
        canaries_in=int(coins.sum()),
        guesses=k_in + k_out,
        correct=correct,
        guesses_in=k_in,
        guesses_out=k_out,
        plans=len(plans),
        delta=float(delta),
        alpha=float(alpha),
        auc=roc_auc(values, coins),
        tpr_at_fpr=tpr,
        fpr=achieved,
        fdp_epsilon_lower_bound=fdp_bound,
        fdp_mu_lower_bound=mu,
        fdp_guesses=fdp_in + fdp_out,
        fdp_correct=fdp_correct,
        fdp_guesses_in=fdp_in,
        fdp_guesses_out=fdp_out,
        verdict_epsilon=max(bound, fdp_bound),
        verdict_analysis=analysis,
        verdict_note=ANALYSES[analysis],
    )


def reconstruction_audit(
    scores: Sequence[Sequence[float]],
    secrets: Sequence[int],
    *,
    delta: float,
    alpha: float = 0.05,
    fractions: Sequence[float] = RECONSTRUCTION_GUESS_FRACTIONS,
    fpr: float = 0.1,
) -> AuditResult:
    """Audit one training run from its reconstruction canaries' candidate scores.

    Each canary's guess is its highest-scoring candidate (ties: the first); the canaries are
    ranked by the margin between their best and second-best score, and for every guess count
    of ``fractions`` (declared before the scores are seen) the r surest guesses are tested with
    the f-DP analysis for k-ary guesses at level ``alpha`` / (number of counts).

    Args:
        scores: an m x k table, the attack's score of each candidate of each canary (higher:
            more likely the trained one).
        secrets: the index of each canary's true candidate.
        delta: the claim's delta, in (0, 1).
        alpha: the level.
        fractions: guess counts as fractions of the canaries.
        fpr: the false-positive rate at which the true-positive rate is reported (true
            candidates against wrong ones, over all canaries).

    Returns:
        The audit's figures (``auc``: P[a true candidate scores above a wrong one]).

    Raises:
        ValueError: fewer than two canaries or candidates, a secret out of range, mismatched
            shapes or non-finite scores.
    """
    values = np.asarray(scores, dtype=float)
    secret = np.asarray(secrets)
    if values.ndim != 2 or secret.shape != (values.shape[0],):
        raise ValueError("scores must be an m x k table and secrets a list of m indexes")
    m, k = values.shape
    if m < 2 or k < 2:
        raise ValueError("an audit needs at least two canaries of at least two candidates")
    if not np.all(np.isfinite(values)):
        raise ValueError("every score must be finite")
    if not np.issubdtype(secret.dtype, np.integer) or secret.min() < 0 or secret.max() >= k:
        raise ValueError(f"every secret must be a candidate index in 0..{k - 1}")
    guess = values.argmax(axis=1)
    ranked = np.sort(values, axis=1)
    margin = ranked[:, -1] - ranked[:, -2]
    order = np.lexsort((np.arange(m), -margin))
    right = guess == secret
    counts = sorted({min(max(1, round(f * m)), m) for f in fractions})
    level = plan_level(alpha, len(counts))
    best = None
    for r in counts:
        correct = int(right[order[:r]].sum())
        mu = mu_lower_bound(m, r, correct, alpha=level, candidates=k)
        if best is None or mu > best[0]:
            best = (mu, r, correct)
    assert best is not None
    mu, r, correct = best
    fdp_bound = gdp_epsilon(mu, delta=delta) if 0 < delta < 1 else 0.0
    is_true = np.zeros_like(values, dtype=bool)
    is_true[np.arange(m), secret] = True
    tpr, achieved = tpr_at_fpr(values.ravel(), is_true.ravel(), fpr)
    return AuditResult(
        epsilon_lower_bound=0.0,
        canaries=m,
        canaries_in=m,
        guesses=0,
        correct=0,
        guesses_in=0,
        guesses_out=0,
        plans=len(counts),
        delta=float(delta),
        alpha=float(alpha),
        auc=roc_auc(values.ravel(), is_true.ravel()),
        tpr_at_fpr=tpr,
        fpr=achieved,
        fdp_epsilon_lower_bound=fdp_bound,
        fdp_mu_lower_bound=mu,
        fdp_guesses=r,
        fdp_correct=correct,
        fdp_guesses_in=r,
        fdp_guesses_out=0,
        verdict_epsilon=fdp_bound,
        verdict_analysis="fdp",
        verdict_note=ANALYSES["fdp"],
        kind="reconstruction",
        candidates=k,
    )


def roc_auc(scores: Sequence[float], included: Sequence[bool]) -> float:
    """P[score of an in-canary > score of an out-canary] + P[tie] / 2 (Mann-Whitney); 0.5 when
    one side is empty."""
    values = np.asarray(scores, dtype=float)
    coins = np.asarray(included, dtype=bool)
    positives, negatives = values[coins], values[~coins]
    if positives.size == 0 or negatives.size == 0:
        return 0.5
    ranks = stats.rankdata(np.concatenate([positives, negatives]))
    u = ranks[: positives.size].sum() - positives.size * (positives.size + 1) / 2
    return float(u / (positives.size * negatives.size))


def tpr_at_fpr(
    scores: Sequence[float], included: Sequence[bool], fpr: float
) -> tuple[float, float]:
    """The true-positive rate at the lowest threshold whose false-positive rate is at most
    ``fpr``, and that false-positive rate.

    With n out-canaries the resolvable rates are multiples of 1/n; when 1/n exceeds ``fpr`` the
    rate used is 0 (no out-canary above the threshold).

    Returns:
        (tpr, achieved fpr); (0, 0) when one side is empty.
    """
    values = np.asarray(scores, dtype=float)
    coins = np.asarray(included, dtype=bool)
    positives, negatives = values[coins], values[~coins]
    if positives.size == 0 or negatives.size == 0:
        return 0.0, 0.0
    allowed = math.floor(fpr * negatives.size + 1e-9)
    descending = np.sort(negatives)[::-1]
    # guess "in" for scores strictly above the (allowed + 1)-th highest out-score
    threshold = descending[allowed] if allowed < negatives.size else -np.inf
    tpr = float((positives > threshold).mean())
    achieved = float((negatives > threshold).mean())
    return tpr, achieved
