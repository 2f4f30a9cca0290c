"""PRV analysis of the sampled Gaussian mechanism: numerical composition of privacy loss
random variables (Gopi, Lee, Wutschitz 2021, "Numerical Composition of Differential Privacy",
https://arxiv.org/abs/2106.02848), computed by opacus's PRV accountant.

opacus's implementation is used rather than the ``prv-accountant`` 0.2.0 release on the
registry, which fails with "Discrete mean differs" at large epsilon. The value returned is the
accountant's upper bound (estimate + ``eps_error``), so it is a guarantee, not an estimate.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from accountant.analysis.opacus_accounting import load
from accountant.mechanism import SampledGaussian, check_delta, check_mechanism

#: ``opacus.accountants.PRVAccountant``, without opacus's torch (:mod:`.opacus_accounting`).
OpacusPRVAccountant = load("prv").PRVAccountant

EPS_ERROR = 0.01


def compute_epsilon_of_history(
    *, history: Sequence[SampledGaussian], delta: float, eps_error: float = EPS_ERROR
) -> float:
    """Upper bound on epsilon at ``delta`` for a sequence of sampled Gaussian mechanisms.

    Args:
        history: (noise_multiplier, sample_rate, steps) entries.
        delta: target delta in (0, 1).
        eps_error: allowed error of the epsilon estimate (the bound adds it).

    Returns:
        Epsilon upper bound.

    Raises:
        ValueError: when a parameter is invalid.
    """
    delta = check_delta(delta)
    mechanisms = [
        check_mechanism(noise_multiplier=e[0], sample_rate=e[1], steps=e[2]) for e in history
    ]
    if not mechanisms:
        return 0.0
    accountant = OpacusPRVAccountant()
    accountant.history = [(m.noise_multiplier, m.sample_rate, m.steps) for m in mechanisms]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(accountant.get_epsilon(delta=delta, eps_error=eps_error))


def compute_epsilon(
    *,
    noise_multiplier: float,
    sample_rate: float,
    steps: int,
    delta: float,
    eps_error: float = EPS_ERROR,
) -> float:
    """Upper bound on epsilon of ``steps`` sampled Gaussian steps at ``delta``.

    Args:
        noise_multiplier: noise standard deviation over the L2 sensitivity (> 0).
        sample_rate: Poisson sampling rate in (0, 1].
        steps: exact number of compositions (>= 1).
        delta: target delta in (0, 1).
        eps_error: allowed error of the epsilon estimate (the bound adds it).

    Returns:
        Epsilon upper bound.
    """
    return compute_epsilon_of_history(
        history=[SampledGaussian(noise_multiplier, sample_rate, steps)],
        delta=delta,
        eps_error=eps_error,
    )
