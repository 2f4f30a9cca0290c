"""FedAvg: the server adds the clients' (example-weighted) mean update.

McMahan et al. 2017, "Communication-Efficient Learning of Deep Networks from Decentralized Data"
(https://arxiv.org/abs/1602.05629); the server learning rate eta (default 1, plain averaging of
the clients' models) follows Reddi et al. 2021 (https://arxiv.org/abs/2003.00295), Algorithm 1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from baselines.core.client_update import ClientUpdate
from baselines.strategies.aggregation import apply_update
from baselines.strategies.base import Strategy


class FedAvg(Strategy):
    """``x_{t+1} = x_t + eta * Delta_t`` with ``Delta_t`` the clients' mean update."""

    name = "fedavg"

    def aggregate_fit(
        self,
        federated_round: int,
        weights: Mapping[str, torch.Tensor],
        results: Sequence[ClientUpdate],
    ) -> dict[str, torch.Tensor]:
        """Average the updates and apply them (see :meth:`Strategy.aggregate_fit`)."""
        return apply_update(weights, self.average(results), self.server_lr)
