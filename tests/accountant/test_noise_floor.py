"""The noise floor's arithmetic against simulations of the mechanism it bounds.

Each simulation runs the FL-GROUP-DP rounds on plain vectors: clipped provider updates (some
chosen adversarially, against the noise already in the model), Gaussian noise per client,
division by m, the server's mean and its FedAvg or FedAvgM step. The bound must hold on every
honest run and fail on runs with less noise than declared.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from accountant.noise_floor import (
    NoisyRounds,
    TensorChange,
    binomial_bound,
    check_noise_floor,
    energy_band,
)


def _clip(update: np.ndarray, norm: float) -> np.ndarray:
    size = float(np.linalg.norm(update))
    return update if size <= norm else update * (norm / size)


def _simulate(rng: np.random.Generator, *, d: int, rounds: int, clients: int, providers: int,
              sigma: float, clip: float, m: int, lr: float, momentum: float = 0.0,
              true_sigma: float | None = None, adversarial: bool = False) -> np.ndarray:  # fmt: skip
    """The final change of d coordinates after ``rounds`` rounds of the mechanism."""
    sigma = sigma if true_sigma is None else true_sigma
    w = np.zeros(d)
    velocity = np.zeros(d)
    for _ in range(rounds):
        mean = np.zeros(d)
        for _ in range(clients):
            total = np.zeros(d)
            for _ in range(providers):
                # adversarial: every provider pushes against the model's noise so far
                raw = -w if adversarial and np.any(w) else rng.normal(size=d)
                total += _clip(raw * 10.0, clip)
            mean += (total + rng.normal(scale=sigma * clip, size=d)) / m
        mean /= clients
        velocity = momentum * velocity + mean
        w = w + lr * velocity
    return w


SHAPE = {"d": 400, "rounds": 4, "clients": 2, "providers": 3, "sigma": 1.0, "clip": 0.5,
         "m": 2, "lr": 0.5}  # fmt: skip


def _rounds(shape: dict, **changes: float) -> NoisyRounds:
    shape = {**shape, **changes}
    return NoisyRounds(
        noise_multiplier=shape["sigma"], clipping_norm=shape["clip"],
        providers_per_round=shape["m"], clients=[shape["clients"]] * shape["rounds"],
        max_providers=[shape["clients"] * shape["providers"]] * shape["rounds"],
        server_lr=shape["lr"], server_momentum=shape.get("momentum", 0.0),
    )  # fmt: skip


def _verdict(change: np.ndarray, rounds: NoisyRounds, alpha: float = 1e-6):  # type: ignore[no-untyped-def]
    half = len(change) // 2
    parts = {"a": change[:half], "b": change[half:]}
    return check_noise_floor({name: TensorChange(len(part), float(part @ part))
                              for name, part in parts.items()}, rounds, alpha=alpha)  # fmt: skip


@pytest.mark.parametrize("momentum", [0.0, 0.8])
def test_the_expected_noise_energy_is_what_the_mechanism_adds(momentum: float) -> None:
    """Without signal (no provider sampled), the mean energy over many runs is ``v d``."""
    rng = np.random.default_rng(0)
    shape = {**SHAPE, "providers": 0, "momentum": momentum}
    energies = [float(np.sum(_simulate(rng, **{k: v for k, v in shape.items() if k != "momentum"},
                                       momentum=momentum) ** 2)) for _ in range(300)]  # fmt: skip
    expected = _rounds(shape).noise_variance() * shape["d"]
    assert np.mean(energies) == pytest.approx(expected, rel=0.02)


@pytest.mark.parametrize("adversarial", [False, True], ids=["random-signal", "signal-against-noise"])
def test_honest_runs_never_fall_outside_the_band(adversarial: bool) -> None:
    rng = np.random.default_rng(1)
    rounds = _rounds(SHAPE)
    failures = sum(not _verdict(_simulate(rng, **SHAPE, adversarial=adversarial), rounds).passed
                   for _ in range(400))  # fmt: skip
    assert failures == 0


def test_the_tail_bound_holds_at_a_large_alpha() -> None:
    """Laurent-Massart at alpha = 0.05 on pure noise: the floor is crossed at most ~5% of the
    time (and the band is not vacuous: the floor is above 80% of the expected energy)."""
    rng = np.random.default_rng(2)
    d, v = 2000, 0.01
    pure = NoisyRounds(noise_multiplier=1.0, clipping_norm=0.1, providers_per_round=1,
                       clients=[1], max_providers=[0], server_lr=1.0)  # fmt: skip
    assert pure.noise_variance() == pytest.approx(v)
    band = energy_band(d, pure, alpha=0.05)
    assert 0.8 * v * d < band.floor < v * d < band.ceiling < 1.2 * v * d
    draws = rng.chisquare(d, size=20000) * v
    assert np.mean(draws < band.floor) <= 0.05 and np.mean(draws > band.ceiling) <= 0.05


def test_a_run_without_noise_or_with_a_tenth_of_it_is_refused() -> None:
    rng = np.random.default_rng(3)
    rounds = _rounds(SHAPE)
    for true_sigma in (1e-9, 0.1):
        verdict = _verdict(_simulate(rng, **SHAPE, true_sigma=true_sigma), rounds)
        assert not verdict.passed
        assert "below the floor" in verdict.problems[0]
        assert f"{verdict.total.expected_noise:.4g}" in verdict.problems[0]


def test_a_smaller_declared_server_step_does_not_hide_a_trained_change() -> None:
    """A change shaped like training (most of it in one tensor) declared with the server step
    that matches its total energy to the noise's: the per-tensor bands refuse it."""
    rng = np.random.default_rng(4)
    shape = {**SHAPE, "d": 20000}
    change = np.concatenate([rng.normal(scale=1.0, size=10000),
                             rng.normal(scale=0.05, size=10000)])  # fmt: skip
    energy = float(change @ change)
    unit = _rounds(shape, lr=1.0)
    lr = math.sqrt(energy / (unit.noise_variance() * shape["d"]))
    rounds = _rounds(shape, lr=lr)
    verdict = _verdict(change, rounds)
    assert verdict.total.floor <= energy <= verdict.total.ceiling  # the total alone passes
    assert not verdict.passed and any(p.startswith("tensor ") for p in verdict.problems)


def test_the_band_needs_values_and_a_valid_alpha() -> None:
    rounds = _rounds(SHAPE)
    with pytest.raises(ValueError):
        energy_band(0, rounds, alpha=1e-6)
    with pytest.raises(ValueError):
        energy_band(10, rounds, alpha=0.0)
    with pytest.raises(ValueError):
        NoisyRounds(noise_multiplier=1.0, clipping_norm=0.5, providers_per_round=1, clients=[],
                    max_providers=[], server_lr=1.0)  # fmt: skip


def test_the_poisson_providers_bound_holds_and_tightens_the_signal_bound() -> None:
    """Under Poisson sampling the providers sampled over all rounds are Binomial(n, q): the
    quantile is exceeded at most alpha of the time, and far below n (every provider) when n is
    large, so the signal bound shrinks (``mini``'s dp-lora: 30 rounds of 2 clients holding ~30
    providers, q = 2/12)."""
    rng = np.random.default_rng(5)
    n, q = 900, 2 / 12
    from scipy.stats import binom

    bound = binomial_bound(n, q, 0.01)
    assert binom.sf(bound, n, q) <= 0.01 < binom.sf(bound - 1, n, q)  # the smallest such k
    assert np.mean(rng.binomial(n, q, size=20000) > bound) <= 0.01 + 0.003  # 4 standard errors
    assert binomial_bound(n, q, 5e-7) < n / 4
    sure = NoisyRounds(noise_multiplier=1.0, clipping_norm=0.5, providers_per_round=2,
                       clients=[2] * 30, max_providers=[30] * 30, server_lr=0.05)  # fmt: skip
    tight = NoisyRounds(**{**sure.__dict__, "providers_total": binomial_bound(n, q, 5e-7)})
    assert tight.signal_bound() < sure.signal_bound() / 4
    assert tight.noise_variance() == sure.noise_variance()
    loose = NoisyRounds(**{**sure.__dict__, "providers_total": 10 * n})  # the sure bound wins
    assert loose.signal_bound() == sure.signal_bound()
