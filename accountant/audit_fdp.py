"""The f-DP analysis of a one-run audit (Mahloujifar, Melis and Chaudhuri, "Auditing
f-Differential Privacy in One Run", ICML 2025, arXiv 2410.22235), beside the
Steinke-Nasr-Jagielski bound of :mod:`accountant.audit`.

The game is the same: m canaries, each with a secret drawn uniformly from ``candidates`` values
(2 for membership: in or out; k for a reconstruction canary with k candidates). The auditor
guesses the secret of r canaries (abstaining on the rest) and v guesses are right. The null
hypothesis is that the training is f-DP for a trade-off curve f; here f is the Gaussian curve
G_mu (mu-GDP, Dong, Roth and Su 2022), the limit of composed subsampled Gaussian steps.

The test (the paper's numerical analysis, "audit with cap"). Write B for the blow-up of f:
an event of probability x on one of two neighbouring datasets has probability at most B(x) on
the other, B(x) = 1 - f(x) = Phi(Phi^-1(x) + mu) for G_mu, and B^-1(x) = Phi(Phi^-1(x) - mu).
For the event E_i = {at least i right guesses} let rho_i be the expected right guesses inside
E_i and eta_i the expected wrong ones, both over m. f-DP and the uniform secret give, for every
i, eta_i >= (k - 1) B^-1(rho_i) (each of the k - 1 wrong values is a neighbour of the right
one; B^-1 is convex, so the per-canary bounds average); and the mass that E_i has and E_(i+1)
lacks, the runs with exactly i right of r, moves both by i and r - i times the same
probability, so rho_i = rho_(i+1) + i / (r - i) (eta_i - eta_(i+1)). If v or more right guesses
had probability tau, rho_v >= tau v / m and eta_v = tau (r - v) / m start a recursion from
i = v - 1 down to 0 whose every step keeps the smallest values these constraints allow, with
B^-1 at rho_(i+1) (<= rho_i: still a valid lower bound):

    eta_i = max(eta_(i+1), (k - 1) B^-1(rho_(i+1))),
    rho_i = rho_(i+1) + i / (r - i) (eta_i - eta_(i+1)).

But rho_0 + eta_0 is the expected number of guesses over m, exactly r / m. When the recursion
ends above r / m, the probability of v or more right guesses is below tau for every f-DP
training, so observing v rejects "the training is f-DP" at level tau. The values only grow
with tau and shrink with mu, so there is a smallest rejecting tau (the p-value,
:func:`fdp_p_value`) and a largest rejected mu (:func:`mu_lower_bound`).

What a rejection means for (epsilon, delta). G_mu is (epsilon, delta)-DP exactly on the curve
delta(epsilon) = Phi(-epsilon/mu + mu/2) - e^epsilon Phi(-epsilon/mu - mu/2) (Dong, Roth and Su
2022, Corollary 2.13). The lower bound reported, :func:`fdp_epsilon_lower_bound`, is
epsilon(mu*, delta) for the largest rejected mu*: a claim (epsilon, delta) is contradicted
when epsilon is below it, which is the same as rejecting mu_claim-GDP for the mu_claim whose
curve passes through the claimed (epsilon, delta) (:func:`gdp_mu`). That assumes the training's
trade-off curve is Gaussian-shaped (true in the limit for DP-SGD and DP-FedAvg, the
composition's central limit theorem); a mechanism that is (epsilon, delta)-DP but far from
Gaussian is not covered by this test, only by the Steinke-Nasr-Jagielski bound.

The claim's mu: taken as :func:`gdp_mu` of the claim's (epsilon, delta) at the audit's delta
(the Gaussian curve through it). :func:`one_run_audit <accountant.audit.one_run_audit>`'s
verdict reads the declared epsilon (verified against the RDP accountant); :func:`claim_mu`
reads the declared mechanism (sigma, q, T) through the PLD accountant, a tighter claim. The central-limit mu of the
composed subsampled Gaussian, :func:`clt_mu`, is given for information only: for few rounds it
can be far from the accountant's curve.

Imports nothing of the kit but numpy and scipy.
"""

from __future__ import annotations

import math

from scipy import optimize, special

#: search range of mu (mu 40 is epsilon about 800 at delta 1e-5: no audit gets there)
MAX_MU = 40.0
#: precision of the bisections on mu and on the level
TOLERANCE = 1e-10


def _check_counts(m: int, r: int, v: int, candidates: int) -> None:
    if not 0 <= v <= r <= m:
        raise ValueError(f"need 0 <= v <= r <= m, got m={m}, r={r}, v={v}")
    if candidates < 2:
        raise ValueError(f"a canary's secret needs at least 2 candidates, got {candidates}")


def gaussian_blow_up_inverse(x: float, *, mu: float) -> float:
    """B^-1(x) = Phi(Phi^-1(x) - mu): the least probability, on a neighbouring dataset, of an
    event that has probability ``x`` under mu-GDP (Dong, Roth and Su 2022, the Gaussian
    trade-off G_mu(a) = Phi(Phi^-1(1 - a) - mu), read as 1 - G_mu(1 - x)).

    Args:
        x: a probability in [0, 1].
        mu: the GDP parameter, >= 0.

    Returns:
        B^-1(x), in [0, 1].

    Raises:
        ValueError: x outside [0, 1] or negative mu.
    """
    if not 0 <= x <= 1 or not mu >= 0:
        raise ValueError(f"need 0 <= x <= 1 and mu >= 0, got {x}, {mu}")
    if x in (0.0, 1.0):
        return float(x)
    return float(special.ndtr(special.ndtri(x) - mu))


def recursion_excess(
    m: int, r: int, v: int, *, mu: float, level: float, candidates: int = 2
) -> float:
    """rho_0 + eta_0 - r / m of the recursion in the module docstring (Mahloujifar, Melis and
    Chaudhuri 2025, the numerical analysis "with cap"): positive when ``v`` right guesses of
    ``r`` reject mu-GDP at ``level``.

    The recursion stops as soon as the excess is positive (the values only grow) or eta stops
    changing (then nothing changes any more); the value returned is then a lower bound of the
    full recursion's, with the same sign.

    Args:
        m: canaries.
        r: guesses made (abstentions excluded).
        v: right guesses.
        mu: the GDP parameter tested.
        level: tau, the probability assumed for v or more right guesses (the test's level).
        candidates: k, the values a canary's secret is drawn from (2 for membership).

    Returns:
        The excess (> 0: rejected).

    Raises:
        ValueError: counts or parameters out of range.
    """
    _check_counts(m, r, v, candidates)
    if not 0 < level <= 1 or not mu >= 0:
        raise ValueError(f"need 0 < level <= 1 and mu >= 0, got {level}, {mu}")
    budget = r / m
    rho = level * v / m
    eta = level * (r - v) / m
    for i in range(v - 1, -1, -1):
        floor = (candidates - 1) * gaussian_blow_up_inverse(min(rho, 1.0), mu=mu)
        if floor <= eta:
            break
        rho += i / (r - i) * (floor - eta)
        eta = floor
        if rho + eta > budget:
            break
    return rho + eta - budget


def rejects(m: int, r: int, v: int, *, mu: float, alpha: float, candidates: int = 2) -> bool:
    """Whether ``v`` right guesses of ``r`` reject "the training is mu-GDP" at level ``alpha``
    (Mahloujifar, Melis and Chaudhuri 2025).

    Args:
        m: canaries.
        r: guesses.
        v: right guesses.
        mu: the GDP parameter of the claim.
        alpha: the level (0.05: 95% confidence).
        candidates: k, the values a canary's secret is drawn from.

    Returns:
        True when the claim is rejected.

    Raises:
        ValueError: counts or parameters out of range.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    return recursion_excess(m, r, v, mu=mu, level=alpha, candidates=candidates) > 0


def fdp_p_value(m: int, r: int, v: int, *, mu: float, candidates: int = 2) -> float:
    """The smallest level at which ``v`` right guesses of ``r`` reject mu-GDP (1 when none
    does), to within :data:`TOLERANCE`.

    Args:
        m: canaries.
        r: guesses.
        v: right guesses.
        mu: the GDP parameter of the claim.
        candidates: k, the values a canary's secret is drawn from.

    Returns:
        The p-value of the claim "the training is mu-GDP".

    Raises:
        ValueError: counts or parameters out of range.
    """
    if recursion_excess(m, r, v, mu=mu, level=1.0, candidates=candidates) <= 0:
        return 1.0
    low, high = 0.0, 1.0  # high rejects, low (a level of 0) never does
    while high - low > TOLERANCE:
        middle = (low + high) / 2
        if middle > 0 and recursion_excess(m, r, v, mu=mu, level=middle, candidates=candidates) > 0:
            high = middle
        else:
            low = middle
    return high


def mu_lower_bound(m: int, r: int, v: int, *, alpha: float = 0.05, candidates: int = 2) -> float:
    """The largest mu such that ``v`` right guesses of ``r`` reject mu-GDP at level ``alpha``
    (0 when not even mu = 0, no privacy loss at all, is rejected), to within
    :data:`TOLERANCE`.

    Args:
        m: canaries.
        r: guesses.
        v: right guesses.
        alpha: the level.
        candidates: k, the values a canary's secret is drawn from.

    Returns:
        mu*, the empirical lower bound on mu.

    Raises:
        ValueError: counts or parameters out of range.
    """
    if not rejects(m, r, v, mu=0.0, alpha=alpha, candidates=candidates):
        return 0.0
    low, high = 0.0, 1.0
    while rejects(m, r, v, mu=high, alpha=alpha, candidates=candidates):
        low, high = high, 2 * high
        if high > MAX_MU:
            return MAX_MU
    while high - low > TOLERANCE:
        middle = (low + high) / 2
        if rejects(m, r, v, mu=middle, alpha=alpha, candidates=candidates):
            low = middle
        else:
            high = middle
    return low


def gdp_delta(epsilon: float, *, mu: float) -> float:
    """The delta of mu-GDP at ``epsilon``: Phi(-epsilon/mu + mu/2) - e^epsilon Phi(-epsilon/mu -
    mu/2) (Dong, Roth and Su 2022, "Gaussian Differential Privacy", Corollary 2.13).

    Args:
        epsilon: >= 0.
        mu: the GDP parameter, >= 0.

    Returns:
        delta in [0, 1].

    Raises:
        ValueError: negative epsilon or mu.
    """
    if not epsilon >= 0 or not mu >= 0:
        raise ValueError(f"need epsilon >= 0 and mu >= 0, got {epsilon}, {mu}")
    if mu == 0:
        return 0.0
    first = special.ndtr(-epsilon / mu + mu / 2)
    second = math.exp(epsilon + special.log_ndtr(-epsilon / mu - mu / 2))
    return float(max(first - second, 0.0))


def gdp_epsilon(mu: float, *, delta: float) -> float:
    """The epsilon of mu-GDP at ``delta``: the root of :func:`gdp_delta` (0 when mu-GDP is
    already (0, delta)-DP).

    Args:
        mu: the GDP parameter, >= 0.
        delta: in (0, 1).

    Returns:
        epsilon, to within 1e-12 relative.

    Raises:
        ValueError: parameters out of range.
    """
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    if gdp_delta(0.0, mu=mu) <= delta:
        return 0.0
    high = max(1.0, mu * mu)
    while gdp_delta(high, mu=mu) > delta:
        high *= 2
    return float(
        optimize.brentq(lambda e: gdp_delta(e, mu=mu) - delta, 0.0, high, xtol=1e-14, rtol=1e-13)
    )


def gdp_mu(epsilon: float, *, delta: float) -> float:
    """The mu whose Gaussian curve is (epsilon, delta)-DP exactly: the claim's mu when a claim
    (epsilon, delta) is read as a Gaussian trade-off curve.

    Args:
        epsilon: >= 0.
        delta: in (0, 1).

    Returns:
        mu (>= 0), to within 1e-12 relative.

    Raises:
        ValueError: parameters out of range.
    """
    if not epsilon >= 0 or not 0 < delta < 1:
        raise ValueError(f"need epsilon >= 0 and 0 < delta < 1, got {epsilon}, {delta}")
    high = 1.0
    while gdp_delta(epsilon, mu=high) < delta:
        high *= 2
    return float(
        optimize.brentq(lambda u: gdp_delta(epsilon, mu=u) - delta, 0.0, high, xtol=1e-14,
                        rtol=1e-13)
    )  # fmt: skip


def clt_mu(*, noise_multiplier: float, sample_rate: float, steps: int) -> float:
    """The central-limit mu of ``steps`` Poisson-subsampled Gaussian steps,
    q sqrt(T (e^(1/sigma^2) - 1)) (Bu, Dong, Long and Su 2020, "Deep Learning with Gaussian
    Differential Privacy", Eq. 4; Dong, Roth and Su 2022, Theorem 5). An approximation that
    needs many steps with a small rate; for information beside :func:`gdp_mu`.

    Args:
        noise_multiplier: sigma, > 0.
        sample_rate: q in (0, 1].
        steps: T >= 1.

    Returns:
        mu.

    Raises:
        ValueError: parameters out of range.
    """
    if not noise_multiplier > 0 or not 0 < sample_rate <= 1 or steps < 1:
        raise ValueError(
            f"need sigma > 0, 0 < q <= 1 and T >= 1, got {noise_multiplier}, {sample_rate}, {steps}"
        )
    return sample_rate * math.sqrt(steps * math.expm1(noise_multiplier**-2))


def claim_mu(*, noise_multiplier: float, sample_rate: float, steps: int, delta: float) -> float:
    """The mu of a declared mechanism read as a Gaussian curve: :func:`gdp_mu` of the PLD
    accountant's epsilon at ``delta`` for ``steps`` Poisson-subsampled Gaussian steps (the
    curve that matches the accountant at the audit's delta; exact for ``sample_rate`` 1, where
    the composition is sqrt(T) / sigma-GDP, Dong, Roth and Su 2022, Corollary 3.3).

    Args:
        noise_multiplier: sigma, > 0.
        sample_rate: q in (0, 1].
        steps: T >= 1.
        delta: the audit's delta, in (0, 1).

    Returns:
        mu.

    Raises:
        ValueError: parameters out of range.
    """
    from accountant.analysis.pld import compute_epsilon  # dp-accounting: loaded on use only

    epsilon = compute_epsilon(
        noise_multiplier=noise_multiplier, sample_rate=sample_rate, steps=steps, delta=delta
    )
    return gdp_mu(epsilon, delta=delta)


def fdp_epsilon_lower_bound(
    m: int, r: int, v: int, *, delta: float, alpha: float = 0.05, candidates: int = 2
) -> float:
    """The f-DP analysis's empirical lower bound: epsilon at ``delta`` of the largest mu-GDP
    curve that ``v`` right guesses of ``r`` reject at ``alpha`` (Mahloujifar, Melis and
    Chaudhuri 2025; Gaussian curves, see the module docstring for what that assumes).

    Args:
        m: canaries.
        r: guesses.
        v: right guesses.
        delta: the claim's delta, in (0, 1).
        alpha: the level.
        candidates: k, the values a canary's secret is drawn from.

    Returns:
        The bound (0 when nothing is rejected).

    Raises:
        ValueError: counts or parameters out of range.
    """
    return gdp_epsilon(mu_lower_bound(m, r, v, alpha=alpha, candidates=candidates), delta=delta)
