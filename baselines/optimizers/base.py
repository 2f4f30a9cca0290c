"""The local optimiser interface: a named factory of ``torch.optim`` optimisers.

:class:`~baselines.local_training.LocalTrainer` calls the factory with the trainable parameters at
the start of every local training call, so by default no optimiser state survives between rounds
or leaks between clients (as in the competition's reference code). A method that keeps optimiser
state per client saves ``optimizer.state_dict()`` in its client state (``ClientJob.state``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any, ClassVar

import torch


class Optimizer(ABC):
    """Base class of local optimisers: options in, ``torch.optim.Optimizer`` out.

    Args:
        options: the optimiser's options object (an instance of its ``option_classes[0]``).
    """

    name: ClassVar[str] = ""
    #: the options dataclasses of the optimiser (see :mod:`baselines.options`).
    option_classes: ClassVar[tuple[type, ...]] = ()

    def __init__(self, options: Any) -> None:
        self.options = options

    @property
    def lr(self) -> float:
        """The learning rate."""
        return float(self.options.lr)

    @abstractmethod
    def __call__(self, parameters: Iterable[torch.nn.Parameter]) -> torch.optim.Optimizer:
        """A fresh optimiser over ``parameters``.

        Args:
            parameters: the trainable parameters.

        Returns:
            The optimiser.
        """
