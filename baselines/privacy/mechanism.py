"""The FL-GROUP-DP mechanism of PFL-DocVQA track 2, as free functions on plain tensors.

A sampled client samples providers, computes one update per sampled provider from the round's
starting weights, clips each update to L2 norm ``S`` over all communicated tensors jointly,
sums the clipped updates, adds Gaussian noise ``N(0, sigma^2 S^2)`` to every coordinate of the
sum and divides by the expected number of sampled providers ``m``. Adding or removing all data
of one provider changes the pre-noise sum by at most ``S`` in L2 norm, so the noisy sum is the
sampled Gaussian mechanism with noise multiplier ``sigma`` (Abadi et al. 2016, "Deep Learning
with Differential Privacy", https://arxiv.org/abs/1607.00133; McMahan et al. 2018, "Learning
Differentially Private Recurrent Language Models", https://arxiv.org/abs/1710.06963, with the
provider as the privacy unit); dividing by the constant ``m`` is post-processing.

Provider sampling: ``poisson`` includes every provider independently with probability
``q = m / N`` (``N`` the fewest providers at any client, the rate the accountant is given), so a
client with more providers than ``N`` samples more than ``m`` in expectation; ``fixed`` draws
exactly ``min(m, providers)`` without replacement, which the Poisson analysis does not cover.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch

Update = Mapping[str, torch.Tensor]
SAMPLINGS = ("poisson", "fixed")
#: relative shrink of a clipped update, so float32 rounding never takes its norm above ``S``.
CLIP_MARGIN = 1e-6


def update_norm(update: Update) -> float:
    """L2 norm of an update over all its tensors jointly.

    Args:
        update: name -> tensor.

    Returns:
        ``sqrt(sum of squares of every value)`` (computed in float64).
    """
    total = sum(float(t.detach().double().pow(2).sum()) for t in update.values())
    return math.sqrt(total)


def clip_factor(norm: float, clipping_norm: float) -> float:
    """The scale that brings an update of L2 norm ``norm`` within ``clipping_norm``.

    ``min(1, S / ||u||)`` (Abadi et al. 2016, Algorithm 1), shrunk by :data:`CLIP_MARGIN` when
    it clips: the scaled values are rounded to float32, which can add an ulp to the norm, and
    the margin keeps every clipped update at most ``S`` however it is rounded.

    Args:
        norm: ``||u||`` (computed in float64).
        clipping_norm: S > 0.

    Returns:
        1 for an update within ``S``, else ``S / ||u|| x (1 - CLIP_MARGIN)``.
    """
    return 1.0 if norm <= clipping_norm else clipping_norm / norm * (1 - CLIP_MARGIN)


def clip_update(update: Update, clipping_norm: float) -> tuple[dict[str, torch.Tensor], float]:
    """Scale an update so that its joint L2 norm is at most ``clipping_norm``.

    Args:
        update: name -> tensor.
        clipping_norm: S.

    Returns:
        The clipped update (float32 copies, scaled by :func:`clip_factor`) and the norm before
        clipping.

    Raises:
        ValueError: for a clipping norm that is not > 0.
    """
    if not clipping_norm > 0:
        raise ValueError(f"clipping_norm must be > 0, got {clipping_norm!r}")
    norm = update_norm(update)
    factor = clip_factor(norm, clipping_norm)
    return {name: (t.detach().double() * factor).float() for name, t in update.items()}, norm


def sum_clipped(updates: Sequence[Update], clipping_norm: float, *, like: Update) -> dict[str, torch.Tensor]:
    """Sum of the clipped updates (zeros shaped like ``like`` when there is none).

    Args:
        updates: one update per sampled provider.
        clipping_norm: S.
        like: names, shapes and dtypes of the result.

    Returns:
        name -> sum of the clipped tensors (float32).
    """
    total = {name: torch.zeros_like(t, dtype=torch.float32) for name, t in like.items()}
    for update in updates:
        clipped, _ = clip_update(update, clipping_norm)
        for name in total:
            total[name] += clipped[name]
    return total


def add_gaussian_noise(
    total: Update, *, std: float, generator: torch.Generator
) -> dict[str, torch.Tensor]:
    """Add independent ``N(0, std^2)`` noise to every coordinate.

    Args:
        total: name -> tensor (the clipped sum).
        std: noise standard deviation, ``sigma * S`` (>= 0).
        generator: the source of randomness (seeded in simulation; a real deployment should
            draw from a cryptographically secure source), on the tensors' device.

    Returns:
        name -> noisy tensor (float32), on the tensors' device.

    Raises:
        ValueError: for a negative standard deviation.
    """
    if not std >= 0:
        raise ValueError(f"noise standard deviation must be >= 0, got {std!r}")
    return {
        name: t.float() + std * torch.randn(t.shape, generator=generator, dtype=torch.float32,
                                            device=t.device)
        for name, t in total.items()
    }


def noisy_mean(
    total: Update,
    *,
    clipping_norm: float,
    noise_multiplier: float,
    expected_providers: int,
    generator: torch.Generator,
) -> dict[str, torch.Tensor]:
    """One Gaussian draw ``N(0, sigma^2 S^2)`` on the clipped sum, then division by ``m``.

    Args:
        total: the sum of the clipped updates.
        clipping_norm: S.
        noise_multiplier: sigma.
        expected_providers: m, the expected number of sampled providers (a constant, so the
            division is post-processing).
        generator: noise randomness.

    Returns:
        The update a client sends.

    Raises:
        ValueError: for a non-positive noise multiplier or ``m``.
    """
    if not noise_multiplier > 0:
        raise ValueError(f"noise_multiplier must be > 0, got {noise_multiplier!r}")
    if expected_providers < 1:
        raise ValueError(f"expected_providers must be >= 1, got {expected_providers!r}")
    noisy = add_gaussian_noise(total, std=noise_multiplier * clipping_norm, generator=generator)
    return {name: t / expected_providers for name, t in noisy.items()}


def privatize(
    updates: Sequence[Update],
    *,
    clipping_norm: float,
    noise_multiplier: float,
    expected_providers: int,
    generator: torch.Generator,
    like: Update,
) -> dict[str, torch.Tensor]:
    """Clip each provider's update, sum, add ``N(0, sigma^2 S^2)``, divide by ``m``.

    Args:
        updates: one update per sampled provider (possibly none).
        clipping_norm: S.
        noise_multiplier: sigma.
        expected_providers: m.
        generator: noise randomness.
        like: names, shapes and dtypes of the result.

    Returns:
        The update a client sends.

    Raises:
        ValueError: for a non-positive noise multiplier, clipping norm or ``m``.
    """
    if not noise_multiplier > 0:
        raise ValueError(f"noise_multiplier must be > 0, got {noise_multiplier!r}")
    if expected_providers < 1:
        raise ValueError(f"expected_providers must be >= 1, got {expected_providers!r}")
    return noisy_mean(
        sum_clipped(updates, clipping_norm, like=like), clipping_norm=clipping_norm,
        noise_multiplier=noise_multiplier, expected_providers=expected_providers,
        generator=generator,
    )


def poisson_rate(providers_per_round: int, min_providers: int) -> float:
    """Inclusion probability of a provider at a client: ``m / N`` (at most 1).

    Args:
        providers_per_round: m.
        min_providers: N, the fewest providers at any client.

    Returns:
        The rate in (0, 1].

    Raises:
        ValueError: when ``m`` is not in ``1..N``.
    """
    if not 1 <= providers_per_round <= min_providers:
        raise ValueError(
            f"providers per round ({providers_per_round}) must be between 1 and the fewest "
            f"providers at a client ({min_providers})"
        )
    return providers_per_round / min_providers


def sample_providers(
    providers: Sequence[str],
    *,
    providers_per_round: int,
    min_providers: int,
    sampling: str,
    generator: torch.Generator,
) -> list[str]:
    """The providers a client trains on this round.

    Args:
        providers: the client's providers (in a fixed order).
        providers_per_round: m.
        min_providers: N (Poisson rate ``m / N``).
        sampling: ``poisson`` (each independently at rate ``m / N``) or ``fixed`` (exactly
            ``min(m, len(providers))`` without replacement).
        generator: randomness.

    Returns:
        The sampled providers, in the input order.

    Raises:
        ValueError: for an unknown sampling scheme or ``m`` outside ``1..N``.
    """
    rate = poisson_rate(providers_per_round, min_providers)
    if sampling == "poisson":
        keep = torch.rand(len(providers), generator=generator, dtype=torch.float64) < rate
        return [p for p, k in zip(providers, keep.tolist(), strict=True) if k]
    if sampling == "fixed":
        count = min(providers_per_round, len(providers))
        chosen = sorted(torch.randperm(len(providers), generator=generator)[:count].tolist())
        return [providers[i] for i in chosen]
    raise ValueError(f"sampling must be one of {', '.join(SAMPLINGS)}; got {sampling!r}")
