"""From a run's privacy options and its federation to the mechanism's parameters and declaration.

:class:`PrivacyOptions` holds what the user asks for (target epsilon and delta, or a noise
multiplier; clipping norm; providers per round; sampling scheme; analysis) and validates it
before any data is read. :func:`make_plan` adds what the federation decides (rounds, clients,
clients per round, the fewest providers at any client), calibrates the noise multiplier with the
accountant (the smallest one whose RDP epsilon meets the target, at the federated sampling rate
of ``accountant.federated_sample_rate``) and returns the :class:`PrivacyPlan` the clients apply
and ``privacy.json`` declares.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from accountant.declaration import FIELDS as DECLARATION_FIELDS
from accountant.declaration import PrivacyDeclaration
from baselines.options import option
from baselines.privacy.mechanism import SAMPLINGS
from benchmark.tracks import PRIVACY

ANALYSES = ("competition", "strict")
PROVIDER_PATHS = ("streamed", "reference")
#: the competition baseline's share of a client's providers sampled per round (50 of 400).
REFERENCE_PROVIDER_FRACTION = 50 / 400


@dataclass(frozen=True)
class PrivacyOptions:
    """What a DP run asks for (the options of the ``dp-`` methods).

    Raises:
        ValueError: naming the invalid option and what to do.
    """

    epsilon: float | None = option(
        None,
        help="DP methods: target epsilon per provider (the noise is calibrated to it; unset: "
        "declare what --noise-multiplier gives).",
    )
    delta: float = option(PRIVACY.delta, help="DP methods: target delta in (0, 1) (default 1e-5).")
    noise_multiplier: float | None = option(
        None, help="DP methods: noise multiplier sigma instead of calibrating it."
    )
    clipping_norm: float = option(
        0.5, help="DP methods: S, the L2 bound of one provider's update (default 0.5)."
    )
    providers_per_round: int | None = option(
        None,
        help="DP methods: m, expected providers per sampled client per round (default 50/400 "
        "of the fewest providers at a client, at least 1).",
    )
    sampling: str = option(
        "poisson",
        key="provider_sampling",
        flag="--sampling",
        choices=SAMPLINGS,
        help="DP methods: provider sampling at a client, poisson or fixed (fixed is not "
        "covered by the accountant).",
    )
    analysis: str = option(
        "competition",
        key="privacy_analysis",
        flag="--analysis",
        choices=ANALYSES,
        help="DP methods: sampling-rate analysis, competition (q = M/K x m/N) or strict "
        "(q = m/N, no amplification by clients).",
    )
    provider_path: str = option(
        "streamed",
        choices=PROVIDER_PATHS,
        help="DP methods: how a client computes its clipped sum, streamed (each provider's "
        "update clipped and added in reused buffers) or reference (every update kept, then "
        "clipped and summed); same result to float32 rounding.",
    )

    def __post_init__(self) -> None:
        if self.epsilon is not None and not (math.isfinite(self.epsilon) and self.epsilon > 0):
            raise ValueError(f"--epsilon must be > 0 (for example 1, 4 or 8); got {self.epsilon}")
        if not 0 < self.delta < 1:
            raise ValueError(f"--delta must be in (0, 1), for example 1e-5; got {self.delta}")
        if self.noise_multiplier is not None and not (
            math.isfinite(self.noise_multiplier) and self.noise_multiplier > 0
        ):
            raise ValueError(
                f"--noise-multiplier must be > 0 (or omit it to calibrate from --epsilon); "
                f"got {self.noise_multiplier}"
            )
        if not (math.isfinite(self.clipping_norm) and self.clipping_norm > 0):
            raise ValueError(f"--clipping-norm must be > 0; got {self.clipping_norm}")
        if self.providers_per_round is not None and self.providers_per_round < 1:
            raise ValueError(f"--providers-per-round must be >= 1; got {self.providers_per_round}")
        if self.sampling not in SAMPLINGS:
            raise ValueError(f"--sampling must be one of {', '.join(SAMPLINGS)}; got {self.sampling!r}")
        if self.analysis not in ANALYSES:
            raise ValueError(f"--analysis must be one of {', '.join(ANALYSES)}; got {self.analysis!r}")
        if self.provider_path not in PROVIDER_PATHS:
            raise ValueError(f"--provider-path must be one of {', '.join(PROVIDER_PATHS)}; "
                             f"got {self.provider_path!r}")

    def require_budget(self) -> None:
        """Raise unless a target epsilon or a noise multiplier is given.

        Raises:
            ValueError: when both are missing.
        """
        if self.epsilon is None and self.noise_multiplier is None:
            raise ValueError(
                "a DP method needs --epsilon (the noise is calibrated to it) or --noise-multiplier"
            )


@dataclass(frozen=True)
class PrivacyPlan(PrivacyDeclaration):
    """The mechanism every sampled client applies, and what the run declares.

    The declared fields are the accountant's :class:`~accountant.declaration.PrivacyDeclaration`
    (``privacy.json`` has one home); the plan adds the rates the mechanism uses.

    Attributes:
        sample_rate: the per-round sampling rate the accountant was given.
        provider_rate: the Poisson inclusion probability at a client, ``m / N``.
    """

    sample_rate: float = 0.0
    provider_rate: float = 0.0

    def declaration(self) -> dict[str, Any]:
        """The ``privacy.json`` object, written by the accountant's declaration class."""
        return PrivacyDeclaration(
            **{name: getattr(self, name) for name in DECLARATION_FIELDS}
        ).to_dict()


def default_providers_per_round(min_providers: int) -> int:
    """The reference share (50 of 400) of the fewest providers at a client, at least 1."""
    return max(1, math.floor(min_providers * REFERENCE_PROVIDER_FRACTION + 0.5))


def min_providers(provider_columns: Sequence[Iterable[str]]) -> int:
    """The fewest distinct providers held by any client.

    Args:
        provider_columns: each client's ``provider`` column.

    Returns:
        N.

    Raises:
        ValueError: when a client has a row without a provider (the data directory lacks
            ``data_points.json`` and the records carry no ``provider`` field) or no row at all.
    """
    counts = []
    for client, column in enumerate(provider_columns):
        providers = list(column)
        if not providers or any(not p for p in providers):
            raise ValueError(
                f"client {client} has training rows without a provider: provider-level DP needs "
                "data_points.json next to the imdb files (or a provider field in every record)"
            )
        counts.append(len(set(providers)))
    if not counts:
        raise ValueError("the federation has no client")
    return min(counts)


def make_plan(
    options: PrivacyOptions,
    *,
    rounds: int,
    clients: int,
    clients_per_round: int,
    fewest_providers: int,
) -> PrivacyPlan:
    """Check the options against the federation and calibrate the noise.

    With a target epsilon and no noise multiplier, sigma is the smallest multiple of 1e-4 whose
    RDP epsilon at the federated sampling rate and ``rounds`` steps meets the target
    (``accountant.get_noise_multiplier``); the declared epsilon is the target. With a noise
    multiplier, its RDP epsilon is computed; it must meet the target when one is given, and is
    declared (rounded up to 4 decimals) when none is.

    Args:
        options: the run's privacy options.
        rounds: federated rounds (steps).
        clients: K.
        clients_per_round: M.
        fewest_providers: N, the fewest providers at any client.

    Returns:
        The plan.

    Raises:
        ValueError: when ``m`` exceeds ``N``, neither epsilon nor a noise multiplier is given,
            or the given noise multiplier does not meet the target epsilon.
    """
    from accountant import compute_epsilon, federated_sample_rate, get_noise_multiplier

    options.require_budget()
    m = options.providers_per_round or default_providers_per_round(fewest_providers)
    if m > fewest_providers:
        raise ValueError(
            f"--providers-per-round {m} exceeds the fewest providers at a client "
            f"({fewest_providers}): the sampling rate m/N would exceed 1; use at most "
            f"{fewest_providers}"
        )
    rate = federated_sample_rate(
        clients_per_round=clients_per_round,
        clients=clients,
        providers_per_round=m,
        min_providers=fewest_providers,
        analysis=options.analysis,
    )
    if options.noise_multiplier is None:
        sigma = get_noise_multiplier(
            target_epsilon=options.epsilon, delta=options.delta, sample_rate=rate, steps=rounds
        )
        epsilon = float(options.epsilon)
    else:
        sigma = float(options.noise_multiplier)
        spent, _ = compute_epsilon(
            noise_multiplier=sigma, sample_rate=rate, steps=rounds, delta=options.delta
        )
        if options.epsilon is not None and spent > options.epsilon:
            raise ValueError(
                f"--noise-multiplier {sigma} gives epsilon {spent:.4f} > --epsilon "
                f"{options.epsilon} at sampling rate {rate:g} over {rounds} rounds; raise it or "
                "omit it to calibrate the noise"
            )
        epsilon = float(options.epsilon) if options.epsilon is not None else math.ceil(
            spent * 1e4
        ) / 1e4
    return PrivacyPlan(
        epsilon=epsilon,
        delta=float(options.delta),
        noise_multiplier=float(sigma),
        clipping_norm=float(options.clipping_norm),
        rounds=int(rounds),
        clients=int(clients),
        clients_per_round=int(clients_per_round),
        providers_per_round=int(m),
        min_providers=int(fewest_providers),
        sampling=options.sampling,
        analysis=options.analysis,
        unit="provider",
        sample_rate=rate,
        provider_rate=m / fewest_providers,
    )
