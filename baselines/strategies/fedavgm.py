"""FedAvgM: FedAvg with server momentum.

Hsu, Qi and Brown 2019, "Measuring the Effects of Non-Identical Data Distribution for Federated
Visual Classification" (https://arxiv.org/abs/1909.06335): ``v_t = beta v_{t-1} + Delta_t``,
``x_{t+1} = x_t + eta v_t``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from baselines.core.client_update import ClientUpdate
from baselines.options import option
from baselines.strategies.aggregation import apply_update, momentum_velocity
from baselines.strategies.base import StrategyOptions, check_decay, pack_state, unpack_state
from baselines.strategies.fedavg import FedAvg


@dataclass(frozen=True)
class FedAvgMOptions(StrategyOptions):
    """Options of FedAvgM: every strategy's, and its momentum."""

    server_momentum: float = option(0.9, help="FedAvgM momentum beta.")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_decay("server_momentum", self.server_momentum)


class FedAvgM(FedAvg):
    """FedAvg with a server momentum buffer (:attr:`FedAvgMOptions.server_momentum`)."""

    name = "fedavgm"
    option_classes = (FedAvgMOptions,)
    config: FedAvgMOptions

    def __init__(self, config: FedAvgMOptions) -> None:
        super().__init__(config)
        self.velocity: dict[str, torch.Tensor] | None = None

    def aggregate_fit(
        self,
        federated_round: int,
        weights: Mapping[str, torch.Tensor],
        results: Sequence[ClientUpdate],
    ) -> dict[str, torch.Tensor]:
        """Update the velocity with the mean update and step along it."""
        delta = self.average(results)
        self.velocity = momentum_velocity(self.velocity, delta, self.config.server_momentum)
        return apply_update(weights, self.velocity, self.server_lr)

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The momentum buffer."""
        return pack_state(velocity=self.velocity)

    def load_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        """Restore the momentum buffer."""
        self.velocity = unpack_state(state, "velocity")
