"""What a client sends back in a round, before the wire: the update a strategy aggregates."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class ClientUpdate:
    """What a client sends back (before the wire) and what the server aggregates.

    Attributes:
        delta: canonical name -> (trained value - starting value), float32.
        num_examples: examples the update was computed on (FedAvg weight).
        metrics: free-form numbers about local training (loss, steps, seconds).
    """

    delta: dict[str, torch.Tensor]
    num_examples: int
    metrics: dict[str, float] = field(default_factory=dict)
