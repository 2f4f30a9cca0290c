"""FedAdam: Adam on the server (Reddi et al. 2021, "Adaptive Federated Optimization",
https://arxiv.org/abs/2003.00295, Algorithm 2): ``v_t = beta2 v_{t-1} + (1 - beta2) Delta_t^2``.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from baselines.strategies.aggregation import adam_second_moment
from baselines.strategies.fedopt import FedOpt


class FedAdam(FedOpt):
    """Server-side Adam without bias correction, as in the paper."""

    name = "fedadam"

    def second_moment(
        self, v: Mapping[str, torch.Tensor], delta: Mapping[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """Exponential moving average of ``Delta_t^2``."""
        return adam_second_moment(v, delta, self.config.beta2)
