"""Provider-level sampling rate of two-level federated sampling (server samples clients, each
sampled client samples providers).

With clients sampled at rate M/K by the server and providers at rate m/N_k inside client k, a
provider is included with probability (M/K)(m/N_k) <= (M/K)(m/N), N the fewest providers at any
client. The "competition" analysis (PFL-DocVQA 2023, track 2) uses this product as the
sampling rate of the sampled Gaussian mechanism. The "strict" analysis grants no amplification
from client sampling, which is the honest rate when the server (the adversary) knows which
clients took part: q = m/N. Both assume Poisson sampling at both levels; fixed-size subsets
(the competition's public code) are not covered by this analysis.
"""

from __future__ import annotations

from fractions import Fraction

from accountant.mechanism import exact_steps

ANALYSES = ("competition", "strict")
SAMPLINGS = ("poisson", "fixed")


def federated_sample_rate(
    *,
    clients_per_round: int,
    clients: int,
    providers_per_round: int,
    min_providers: int,
    analysis: str = "competition",
) -> float:
    """Per-round sampling rate of one provider.

    Examples:
        >>> federated_sample_rate(clients_per_round=2, clients=10, providers_per_round=50,
        ...                       min_providers=400)
        0.025
        >>> federated_sample_rate(clients_per_round=2, clients=10, providers_per_round=50,
        ...                       min_providers=400, analysis="strict")
        0.125

    Args:
        clients_per_round: clients the server samples per round (expected number), M.
        clients: clients in the federation, K.
        providers_per_round: providers a sampled client samples per round (expected), m.
        min_providers: fewest providers held by any client, N.
        analysis: "competition" (q = M/K x m/N) or "strict" (q = m/N).

    Returns:
        The sampling rate, computed as one exact fraction and rounded once.

    Raises:
        ValueError: naming the invalid argument.
    """
    clients = exact_steps(clients, name="clients")
    clients_per_round = exact_steps(clients_per_round, name="clients_per_round")
    min_providers = exact_steps(min_providers, name="min_providers")
    providers_per_round = exact_steps(providers_per_round, name="providers_per_round")
    if clients_per_round > clients:
        raise ValueError(
            f"clients_per_round ({clients_per_round}) cannot exceed clients ({clients})"
        )
    if providers_per_round > min_providers:
        raise ValueError(
            f"providers_per_round ({providers_per_round}) cannot exceed min_providers "
            f"({min_providers}): the sampling rate would exceed 1"
        )
    provider_rate = Fraction(providers_per_round, min_providers)
    if analysis == "competition":
        return float(Fraction(clients_per_round, clients) * provider_rate)
    if analysis == "strict":
        return float(provider_rate)
    raise ValueError(f"analysis must be one of {', '.join(ANALYSES)}; got {analysis!r}")
