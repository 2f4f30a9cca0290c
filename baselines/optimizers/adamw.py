"""AdamW, the local optimiser of the competition's baselines.

Loshchilov and Hutter 2019, "Decoupled Weight Decay Regularization"
(https://arxiv.org/abs/1711.05101), as ``torch.optim.AdamW`` with its default betas and eps.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch

from baselines.optimizers.base import LocalOptimizerOptions, Optimizer
from baselines.options import option

#: torch.optim.AdamW's default weight decay, which the official ``build_optimizer`` keeps: the
#: presets that follow the organisers' FedAvg recipe set it.
OFFICIAL_WEIGHT_DECAY = 0.01


@dataclass(frozen=True)
class AdamWOptions:
    """Options of the local AdamW.

    Raises:
        ValueError: for a learning rate <= 0 or a negative weight decay.
    """

    lr: float = option(2e-4, help="local learning rate.")
    weight_decay: float = option(0.0, help="local decoupled weight decay.")

    def __post_init__(self) -> None:
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay}")


class AdamW(Optimizer):
    """``torch.optim.AdamW`` with the options' learning rate and weight decay."""

    name = "adamw"
    option_classes = (AdamWOptions, LocalOptimizerOptions)

    def __call__(self, parameters: Iterable[torch.nn.Parameter]) -> torch.optim.Optimizer:
        """A fresh AdamW over ``parameters``."""
        return torch.optim.AdamW(
            list(parameters), lr=self.options.lr, weight_decay=self.options.weight_decay
        )
