"""The FL-GROUP-DP mechanism on plain tensors: clipping, noise, provider sampling, sensitivity."""

from __future__ import annotations

import math

import pytest
import torch

from baselines.config import TrainConfig
from baselines.privacy.mechanism import (
    add_gaussian_noise,
    clip_update,
    poisson_rate,
    privatize,
    sample_providers,
    sum_clipped,
    update_norm,
)

SHAPES = {"a.weight": (7, 5), "b.bias": (3,), "c.table": (4, 2, 3)}


def _update(generator: torch.Generator, scale: float) -> dict[str, torch.Tensor]:
    return {n: scale * torch.randn(s, generator=generator) for n, s in SHAPES.items()}


def _difference(a, b) -> float:
    return update_norm({n: a[n] - b[n] for n in a})


def test_update_norm_is_joint_over_all_tensors() -> None:
    update = {"x": torch.tensor([3.0]), "y": torch.tensor([[4.0, 0.0]])}
    assert update_norm(update) == pytest.approx(5.0)


@pytest.mark.parametrize("clipping_norm", [1e-3, 0.5, 3.0])
def test_each_clipped_contribution_has_norm_at_most_s(clipping_norm: float) -> None:
    generator = torch.Generator().manual_seed(0)
    for scale in (1e-4, 1e-2, 0.1, 1.0, 50.0, 1e4):
        update = _update(generator, scale)
        clipped, norm = clip_update(update, clipping_norm)
        assert norm == pytest.approx(update_norm(update))
        assert update_norm(clipped) <= clipping_norm
        if norm <= clipping_norm:  # small updates pass unchanged
            assert all(torch.allclose(clipped[n], update[n]) for n in update)
        else:  # large ones keep their direction and land on the sphere of radius S
            assert update_norm(clipped) == pytest.approx(clipping_norm, rel=1e-5)
            ratio = clipped["a.weight"] / update["a.weight"]
            assert torch.allclose(ratio, ratio.flatten()[0].expand_as(ratio))


def test_clipping_rejects_a_non_positive_norm() -> None:
    with pytest.raises(ValueError, match="clipping_norm"):
        clip_update({"x": torch.ones(2)}, 0.0)


def test_noise_standard_deviation_matches_sigma_times_s() -> None:
    sigma, s, m = 1.145, 0.5, 4
    zeros = {"w": torch.zeros(400, 250), "b": torch.zeros(1000)}
    generator = torch.Generator().manual_seed(1)
    draws = torch.cat([
        torch.cat([t.flatten() for t in privatize(
            [], clipping_norm=s, noise_multiplier=sigma, expected_providers=m,
            generator=generator, like=zeros).values()])
        for _ in range(4)
    ]).double()
    # the sent update is (sum + N(0, sigma^2 S^2)) / m: std sigma S / m, mean 0
    n = draws.numel()
    expected = sigma * s / m
    assert abs(float(draws.mean())) < 5 * expected / math.sqrt(n)
    assert float(draws.std()) == pytest.approx(expected, rel=5 / math.sqrt(2 * n))
    # the noise on the sum itself, coordinate by coordinate over many independent draws
    samples = torch.stack([
        add_gaussian_noise({"x": torch.zeros(8)}, std=sigma * s, generator=generator)["x"]
        for _ in range(20000)
    ]).double()
    per_coordinate = samples.std(dim=0)
    tolerance = 5 * sigma * s / math.sqrt(2 * samples.shape[0])
    assert torch.all((per_coordinate - sigma * s).abs() < tolerance)
    correlation = torch.corrcoef(samples.T)
    assert float((correlation - torch.eye(8)).abs().max()) < 5 / math.sqrt(samples.shape[0])


def test_privatize_is_clipped_sum_plus_noise_over_m() -> None:
    generator = torch.Generator().manual_seed(2)
    updates = [_update(generator, scale) for scale in (0.01, 5.0, 100.0)]
    like = updates[0]
    clipped_sum = sum_clipped(updates, 0.5, like=like)
    noise_seed = 7
    out = privatize(updates, clipping_norm=0.5, noise_multiplier=0.8, expected_providers=2,
                    generator=torch.Generator().manual_seed(noise_seed), like=like)
    noise = add_gaussian_noise({n: torch.zeros_like(t) for n, t in like.items()}, std=0.4,
                               generator=torch.Generator().manual_seed(noise_seed))
    for name in like:
        assert torch.allclose(out[name], (clipped_sum[name] + noise[name]) / 2, atol=1e-6)


def test_removing_one_provider_changes_the_pre_noise_sum_by_at_most_s() -> None:
    generator = torch.Generator().manual_seed(3)
    s = 0.5
    updates = [_update(generator, scale) for scale in (1e-3, 0.2, 3.0, 40.0, 1e3)]
    full = sum_clipped(updates, s, like=updates[0])
    for index in range(len(updates)):
        without = sum_clipped(updates[:index] + updates[index + 1:], s, like=updates[0])
        assert _difference(full, without) <= s * (1 + 1e-6)
    # an adversarial provider (huge update in any direction) still moves the sum by <= S
    for scale in (1e2, 1e6):
        added = sum_clipped([*updates, _update(generator, scale)], s, like=updates[0])
        assert _difference(added, full) <= s * (1 + 1e-6)


def test_poisson_provider_sampling_has_the_declared_rate() -> None:
    providers = [f"p{i:02d}" for i in range(16)]
    m, n_min, rounds = 3, 12, 5000
    generator = torch.Generator().manual_seed(4)
    counts = dict.fromkeys(providers, 0)
    sizes = []
    for _ in range(rounds):
        chosen = sample_providers(providers, providers_per_round=m, min_providers=n_min,
                                  sampling="poisson", generator=generator)
        sizes.append(len(chosen))
        for p in chosen:
            counts[p] += 1
    rate = poisson_rate(m, n_min)
    assert rate == m / n_min
    trials = rounds * len(providers)
    measured = sum(counts.values()) / trials
    assert abs(measured - rate) < 5 * math.sqrt(rate * (1 - rate) / trials)
    for count in counts.values():  # every provider, not only on average
        assert abs(count / rounds - rate) < 5 * math.sqrt(rate * (1 - rate) / rounds)
    # a client with N_k > N providers samples N_k m / N in expectation (the divisor stays m)
    assert sum(sizes) / rounds == pytest.approx(len(providers) * rate, rel=0.03)


def test_two_level_sampling_rate_matches_the_competition_analysis() -> None:
    """Server picks M of K clients (the engine's strategy), a client picks providers at m/N."""
    from accountant import federated_sample_rate

    clients, m_clients, m, n_min, rounds = 10, 2, 2, 8, 4000
    strategy = TrainConfig(clients_per_round=m_clients).build_strategy()
    generator = torch.Generator().manual_seed(5)
    included = 0
    for federated_round in range(1, rounds + 1):
        if 3 in strategy.configure_fit(federated_round, clients, seed=0):
            chosen = sample_providers([f"p{i}" for i in range(n_min)], providers_per_round=m,
                                      min_providers=n_min, sampling="poisson", generator=generator)
            included += "p5" in chosen
    rate = federated_sample_rate(clients_per_round=m_clients, clients=clients,
                                 providers_per_round=m, min_providers=n_min)
    assert rate == pytest.approx(0.2 * 2 / 8)
    assert abs(included / rounds - rate) < 5 * math.sqrt(rate * (1 - rate) / rounds)


@pytest.mark.parametrize(("available", "m"), [(10, 3), (10, 10), (12, 5)])
def test_fixed_size_sampling_picks_exactly_m(available: int, m: int) -> None:
    providers = [f"p{i}" for i in range(available)]
    generator = torch.Generator().manual_seed(6)
    seen = set()
    for _ in range(300):
        chosen = sample_providers(providers, providers_per_round=m, min_providers=10,
                                  sampling="fixed", generator=generator)
        assert len(chosen) == m and len(set(chosen)) == m and set(chosen) <= set(providers)
        seen.update(chosen)
    assert seen == set(providers)


def test_sampling_rejects_bad_arguments() -> None:
    generator = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="between 1 and the fewest"):
        sample_providers(["a", "b"], providers_per_round=3, min_providers=2, sampling="poisson",
                         generator=generator)
    with pytest.raises(ValueError, match="sampling must be one of"):
        sample_providers(["a", "b"], providers_per_round=1, min_providers=2, sampling="uniform",
                         generator=generator)
    with pytest.raises(ValueError, match="noise_multiplier"):
        privatize([], clipping_norm=0.5, noise_multiplier=0.0, expected_providers=1,
                  generator=generator, like={"x": torch.zeros(1)})
