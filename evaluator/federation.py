"""The federation's facts, read from the benchmark the evaluator holds (never from a participant).

A privacy claim's sampling rate depends on how many clients there are and how many providers
the smallest client holds; its delta must stay below 1/N for the N providers. A participant's
``privacy.json`` states these figures too, but verifying a claim with the participant's own
figures proves nothing (a declared ``min_providers`` of 1,000,000 makes any noise look private),
so verification takes them from here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from evaluator.benchmark_info import clients_of


@dataclass(frozen=True)
class Federation:
    """Clients and providers of the benchmark's training split.

    Attributes:
        clients: K, the number of federated clients.
        min_providers: providers held by the client with the fewest (None when the benchmark
            directory has no ``data_points.json``).
        providers: providers over all clients (None when unknown).
    """

    clients: int
    min_providers: int | None = None
    providers: int | None = None

    @property
    def max_delta(self) -> float | None:
        """1/N, the largest delta that protects N providers (None when N is unknown)."""
        return None if not self.providers else 1.0 / self.providers


def federation_of(data_dir: Path | None) -> Federation:
    """The federation of a benchmark directory.

    Clients come from ``benchmark.json``; providers per client from ``data_points.json``
    (``{"client_<k>": {"<provider>": [record indexes]}}``) in ``DIR/participant`` or ``DIR``.

    Args:
        data_dir: the benchmark directory, or None.

    Returns:
        The facts that could be read (provider counts None when the directory has none).
    """
    clients = clients_of(data_dir)
    if data_dir is None:
        return Federation(clients=clients)
    for candidate in (Path(data_dir) / "participant" / "data_points.json",
                      Path(data_dir) / "data_points.json"):  # fmt: skip
        if not candidate.is_file():
            continue
        points = json.loads(candidate.read_text())
        counts = [
            len(providers)
            for name, providers in points.items()
            if name.startswith("client_") and isinstance(providers, dict)
        ]
        if counts:
            return Federation(clients=clients, min_providers=min(counts), providers=sum(counts))
    return Federation(clients=clients)
