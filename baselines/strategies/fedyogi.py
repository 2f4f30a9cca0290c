"""FedYogi: Yogi on the server (Reddi et al. 2021, "Adaptive Federated Optimization",
https://arxiv.org/abs/2003.00295, Algorithm 2; Zaheer et al. 2018 for Yogi):
``v_t = v_{t-1} - (1 - beta2) Delta_t^2 sign(v_{t-1} - Delta_t^2)``.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from baselines.strategies.aggregation import yogi_second_moment
from baselines.strategies.fedopt import FedOpt


class FedYogi(FedOpt):
    """Server-side Yogi: the second moment moves additively, so it grows more slowly than Adam's."""

    name = "fedyogi"

    def second_moment(
        self, v: Mapping[str, torch.Tensor], delta: Mapping[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """Yogi's sign-controlled update of ``v``."""
        return yogi_second_moment(v, delta, self.config.beta2)
