"""The noise floor of a DP claim: the Gaussian noise a mechanism adds does not leave the model.

A track-2 claim declares a noise multiplier sigma, a clipping norm S and the sampling; the
accountant turns them into epsilon. Nothing in that arithmetic looks at the model, so a model
trained without noise (or with less) could carry any claim. But the noise the mechanism adds to
the communicated coordinates is *in* the final model, with an energy the declaration fixes, and
a model that lacks it was not produced by the declared mechanism. This module bounds that
energy from below (and above) with a false-alarm probability ``alpha``.

The mechanism (FL-GROUP-DP: ``baselines.methods.dp_fedavg``, DP-LoRA, DP-CLGECL). In round
``t = 1..T`` the server takes ``M_t`` clients (read from the log). Client ``c`` sends

    u_{c,t} = (s_{c,t} + z_{c,t}) / m,    z_{c,t} ~ N(0, sigma^2 S^2 I_d) fresh,

with ``s_{c,t}`` the sum of its sampled providers' updates, each clipped to L2 norm ``S`` (so
``||s_{c,t}|| <= K_{c,t} S`` for ``K_{c,t}`` sampled providers) and ``m`` the expected providers
per client (a constant). The server's step is linear in the clients' mean ``Delta_t =
(1/M_t) sum_c u_{c,t}``: FedAvg ``w_t = w_{t-1} + eta Delta_t``, or FedAvgM ``v_t = beta
v_{t-1} + Delta_t``, ``w_t = w_{t-1} + eta v_t``. Unrolled, on the d communicated coordinates,

    delta := w_T - w_0 = sum_t a_t (S_t + Z_t),   a_t = eta c_t / (M_t m),
    c_t = sum_{k=0}^{T-t} beta^k  (1 for FedAvg),

with ``S_t = sum_c s_{c,t}`` and ``Z_t = sum_c z_{c,t} ~ N(0, M_t sigma^2 S^2 I_d)``.

**Noise.** ``N = sum_t a_t Z_t`` is Gaussian: the draws of different clients and rounds are
independent of each other, so ``N ~ N(0, v I_d)`` with ``v = sigma^2 S^2 sum_t a_t^2 M_t``
(the expected noise energy is ``v d``) and ``||N||^2 / v`` is chi-square with d degrees of
freedom.

**Signal.** ``A = sum_t a_t S_t`` is *not* independent of ``N``: a later round trains from a
model that holds the earlier rounds' noise, and nothing stops its update from pointing against
it. So we do not assume independence; we bound ``A`` in norm, whatever its direction:
``||A|| <= B = S sum_t a_t K_t`` with ``K_t`` the providers the round's clients sampled.
With fixed sampling ``K_t = m M_t``. With Poisson sampling every provider of every client of
every round is included independently at the declared rate ``q = m / N`` (``N`` the fewest
providers at a client, from the benchmark), so ``sum_t K_t`` is Binomial(``n``, q) with ``n``
the providers the round's clients hold, summed over rounds (``data_points.json``), and
``sum_t a_t K_t <= max_t a_t sum_t K_t <= max_t a_t k`` with ``k`` its ``1 - alpha_K`` quantile,
except with probability ``alpha_K``; the sure bound (every provider sampled) is used when it is
smaller. The triangle inequality then gives, for every outcome of the noise (and, under
Poisson sampling, every outcome of the sampling but a set of probability ``alpha_K``),

    ||N|| - B - R  <=  ||delta||  <=  ||N|| + B + R,

``R`` being a bound on the rounding of the stored checkpoint (``(T + 1) eps / 2 ||w_T||``
for a dtype of machine epsilon ``eps``: each server step and the final save round every value
by at most ``eps / 2`` of it; this takes ``||w_t|| <= ||w_T||`` for the intermediate models and
ignores the float32 rounding of the updates themselves, both negligible beside the noise in
float32, where ``R`` is about ``1e-7 ||w_T||``).

**Tail.** Laurent and Massart (2000, "Adaptive estimation of a quadratic functional by model
selection", Ann. Statist. 28(5), Lemma 1): for ``X ~ chi^2_d`` and ``x > 0``,
``P(X <= d - 2 sqrt(d x)) <= e^-x`` and ``P(X >= d + 2 sqrt(d x) + 2x) <= e^-x``. With
``x = ln(1/alpha)``:

    floor   = (max(0, sqrt(v (d - 2 sqrt(d x))) - B - R))^2,
    ceiling = (sqrt(v (d + 2 sqrt(d x) + 2 x)) + B + R)^2,

and a run of the declared mechanism has ``||delta||^2 < floor`` (or ``> ceiling``) with
probability at most ``alpha`` (plus ``alpha_K``; the evaluator splits one budget between
them): no assumption on the data, the training or the signal beyond the
clipping, only that the declared noise was drawn and added as above.

**Why a ceiling and per-tensor bands.** The server learning rate ``eta`` scales noise and
signal alike and is the participant's to declare: a floor alone is met by a non-private model
that declares a small enough ``eta``. The ceiling pins ``eta`` from above, and since the noise is
spread evenly over the coordinates (``v`` per value in every tensor) while a trained change is
not, each tensor ``j`` must also lie in its own band at ``d_j`` (the same ``B``, since the signal
may sit in one tensor; ``alpha`` split over the tensors, Bonferroni). A change shaped like
training, whatever ``eta`` is declared, leaves some large tensor out of its band.

**Limits.** The floor checks the declared noise *relative to the declared server step*: a run
that under-noises by a factor and declares an ``eta`` smaller by the same factor has the noise
energy of the claim, and only its signal (bounded by ``B``) can give it away. Adaptive server
optimisers (FedAdam, FedYogi) are not linear in the noise and have no floor here; neither has a
lossy uplink (NF4), whose quantisation of the noisy update is not modelled. Coordinates that
travel only as LoRA factors are not in the merged checkpoint as such and are not covered.

Imports nothing of the kit but scipy (numbers in, numbers out).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

#: the false-alarm probability of the whole check on an honest run of the declared mechanism.
DEFAULT_ALPHA = 1e-6


@dataclass(frozen=True)
class NoisyRounds:
    """The declared mechanism's parameters that fix the noise and signal in the final change.

    Attributes:
        noise_multiplier: sigma.
        clipping_norm: S.
        providers_per_round: m, the constant the noisy sum is divided by.
        clients: M_t, the clients whose updates the server averaged in each round.
        max_providers: K_t, the most providers those clients can have sampled in each round
            (a sure bound).
        server_lr: eta.
        server_momentum: beta (FedAvgM; 0 for FedAvg).
        providers_total: a bound on ``sum_t K_t`` that holds with high probability (Poisson
            sampling: :func:`binomial_bound`), or None; the smaller signal bound is used.
    """

    noise_multiplier: float
    clipping_norm: float
    providers_per_round: int
    clients: Sequence[int]
    max_providers: Sequence[int]
    server_lr: float
    server_momentum: float = 0.0
    providers_total: int | None = None

    def __post_init__(self) -> None:
        if len(self.clients) != len(self.max_providers) or not self.clients:
            raise ValueError("need the clients and the most providers of every round (>= 1)")
        if any(count < 1 for count in self.clients):
            raise ValueError("every round needs at least one client")
        if not (self.noise_multiplier > 0 and self.clipping_norm > 0 and self.server_lr > 0
                and self.providers_per_round >= 1 and 0 <= self.server_momentum < 1):  # fmt: skip
            raise ValueError("sigma, S, eta and m must be > 0 and the momentum in [0, 1)")

    def step_weights(self) -> list[float]:
        """``a_t = eta c_t / (M_t m)``: how much of round t's summed updates is in the model."""
        rounds = len(self.clients)
        weights = []
        for t, count in enumerate(self.clients):
            carried = sum(self.server_momentum**k for k in range(rounds - t))
            weights.append(self.server_lr * carried / (count * self.providers_per_round))
        return weights

    def noise_variance(self) -> float:
        """``v``: the variance of the noise on one communicated coordinate of the final model."""
        scale = (self.noise_multiplier * self.clipping_norm) ** 2
        return scale * sum(a * a * count for a, count in zip(self.step_weights(), self.clients,
                                                              strict=True))  # fmt: skip

    def signal_bound(self) -> float:
        """``B``: the largest norm the clipped updates can add to the final change (the smaller
        of the sure bound and, when given, the high-probability one)."""
        weights = self.step_weights()
        sure = self.clipping_norm * sum(
            a * k for a, k in zip(weights, self.max_providers, strict=True)
        )
        if self.providers_total is None:
            return sure
        return min(sure, self.clipping_norm * max(weights) * self.providers_total)


def binomial_bound(trials: int, rate: float, alpha: float) -> int:
    """The ``1 - alpha`` quantile of Binomial(``trials``, ``rate``): the most providers Poisson
    sampling includes in ``trials`` independent draws, except with probability ``alpha``.

    Args:
        trials: n >= 0.
        rate: q in [0, 1].
        alpha: in (0, 1).

    Returns:
        k with P(Binomial(n, q) > k) <= alpha.
    """
    from scipy.stats import binom

    if trials == 0 or rate <= 0:
        return 0
    return int(binom.ppf(1 - alpha, trials, min(rate, 1.0)))


@dataclass(frozen=True)
class EnergyBand:
    """Where the energy ``||delta||^2`` of d coordinates must lie under the declared mechanism.

    Attributes:
        values: d.
        expected_noise: ``v d``, the noise's expected energy.
        floor: the lower bound (false alarm at most ``alpha``).
        ceiling: the upper bound (false alarm at most ``alpha``).
        alpha: the false-alarm probability of each side.
    """

    values: int
    expected_noise: float
    floor: float
    ceiling: float
    alpha: float


def energy_band(values: int, rounds: NoisyRounds, *, alpha: float, rounding: float = 0.0) -> EnergyBand:
    """The band of the module docstring for ``values`` coordinates.

    Args:
        values: d >= 1.
        rounds: the declared mechanism.
        alpha: false-alarm probability of each side, in (0, 1).
        rounding: R, the norm the stored values' rounding can add or remove.

    Returns:
        The band.

    Raises:
        ValueError: for d < 1 or alpha outside (0, 1).
    """
    if values < 1 or not 0 < alpha < 1:
        raise ValueError("need d >= 1 and alpha in (0, 1)")
    x = math.log(1 / alpha)
    v = rounds.noise_variance()
    slack = rounds.signal_bound() + rounding
    low = max(0.0, values - 2 * math.sqrt(values * x))
    high = values + 2 * math.sqrt(values * x) + 2 * x
    floor = max(0.0, math.sqrt(v * low) - slack) ** 2
    ceiling = (math.sqrt(v * high) + slack) ** 2
    return EnergyBand(values, v * values, floor, ceiling, alpha)


@dataclass(frozen=True)
class TensorChange:
    """One communicated tensor's change from the base.

    Attributes:
        values: its number of values.
        energy: ``||w_T - w_0||^2`` (float64).
        rounding: R for this tensor.
    """

    values: int
    energy: float
    rounding: float = 0.0


@dataclass
class NoiseFloorVerdict:
    """The outcome of :func:`check_noise_floor`.

    Attributes:
        passed: every band holds.
        total: the band of all communicated coordinates together.
        observed: their energy.
        problems: one sentence per band that does not hold (the total's first).
        tensors_checked: tensors given a band of their own.
    """

    passed: bool
    total: EnergyBand
    observed: float
    problems: list[str] = field(default_factory=list)
    tensors_checked: int = 0

    def to_dict(self) -> dict[str, object]:
        """JSON-ready figures."""
        return {
            "passed": self.passed, "values": self.total.values,
            "observed_energy": self.observed, "expected_noise_energy": self.total.expected_noise,
            "floor": self.total.floor, "ceiling": self.total.ceiling,
            "alpha": 4 * self.total.alpha, "tensors_checked": self.tensors_checked,
            "problems": list(self.problems),
        }  # fmt: skip


def check_noise_floor(
    changes: Mapping[str, TensorChange], rounds: NoisyRounds, *, alpha: float = DEFAULT_ALPHA
) -> NoiseFloorVerdict:
    """Whether the communicated coordinates' change carries the declared noise.

    ``alpha`` is split four ways (Bonferroni): the total's floor and ceiling get ``alpha/4``
    each, and the per-tensor floors and ceilings ``alpha/4`` each across the tensors, so an
    honest run is refused with probability at most ``alpha``.

    Args:
        changes: tensor name -> its change (the communicated tensors present in the checkpoint).
        rounds: the declared mechanism.
        alpha: the false-alarm probability of the whole check.

    Returns:
        The verdict, with the expected and observed energies.

    Raises:
        ValueError: no changes given.
    """
    if not changes:
        raise ValueError("no communicated tensor to check")
    values = sum(change.values for change in changes.values())
    observed = sum(change.energy for change in changes.values())
    rounding = math.sqrt(sum(change.rounding**2 for change in changes.values()))
    total = energy_band(values, rounds, alpha=alpha / 4, rounding=rounding)
    verdict = NoiseFloorVerdict(True, total, observed, tensors_checked=len(changes))
    if observed < total.floor:
        verdict.problems.append(
            f"the {values:,} communicated values changed from the base by an energy "
            f"(sum of squares) of {observed:.4g}, below the floor {total.floor:.4g} that the "
            f"declared noise implies (expected noise energy {total.expected_noise:.4g})"
        )
    elif observed > total.ceiling:
        verdict.problems.append(
            f"the {values:,} communicated values changed from the base by an energy of "
            f"{observed:.4g}, above the ceiling {total.ceiling:.4g} that the declared noise, "
            f"clipping and server step allow (expected noise energy {total.expected_noise:.4g})"
        )
    each = alpha / (4 * len(changes))
    for name in sorted(changes):
        change = changes[name]
        band = energy_band(change.values, rounds, alpha=each, rounding=change.rounding)
        if change.energy < band.floor or change.energy > band.ceiling:
            side = "below its floor" if change.energy < band.floor else "above its ceiling"
            verdict.problems.append(
                f"tensor {name} ({change.values:,} values) changed by an energy of "
                f"{change.energy:.4g}, {side} [{band.floor:.4g}, {band.ceiling:.4g}] "
                f"(expected noise energy {band.expected_noise:.4g})"
            )
    verdict.passed = not verdict.problems
    return verdict
