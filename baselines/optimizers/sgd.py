"""SGD with (optionally Nesterov) momentum as a local optimiser (``torch.optim.SGD``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch

from baselines.optimizers.base import LocalOptimizerOptions, Optimizer
from baselines.options import option


@dataclass(frozen=True)
class SGDOptions:
    """Options of the local SGD.

    Raises:
        ValueError: for a learning rate <= 0, a momentum outside [0, 1) or Nesterov without
            momentum.
    """

    lr: float = option(1e-2, help="local learning rate.")
    momentum: float = option(0.9, help="sgd: momentum factor (0: plain SGD).")
    nesterov: bool = option(False, help="sgd: Nesterov momentum (needs momentum > 0).")
    weight_decay: float = option(0.0, help="local L2 weight decay.")

    def __post_init__(self) -> None:
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if not 0 <= self.momentum < 1:
            raise ValueError(f"--momentum must be in [0, 1), got {self.momentum}")
        if self.nesterov and self.momentum == 0:
            raise ValueError("--nesterov needs --momentum > 0")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay}")


class SGD(Optimizer):
    """``torch.optim.SGD`` with momentum."""

    name = "sgd"
    option_classes = (SGDOptions, LocalOptimizerOptions)

    def __call__(self, parameters: Iterable[torch.nn.Parameter]) -> torch.optim.Optimizer:
        """A fresh SGD over ``parameters``."""
        o = self.options
        return torch.optim.SGD(list(parameters), lr=o.lr, momentum=o.momentum,
                               nesterov=o.nesterov, weight_decay=o.weight_decay)
