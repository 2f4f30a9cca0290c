"""The local optimiser interface: a named factory of ``torch.optim`` optimisers.

:class:`~baselines.engine.local_training.LocalTrainer` calls the factory with the trainable parameters at
the start of every local training call, so by default no optimiser state survives between rounds
or leaks between clients (as in the competition's reference code). Two choices are common to every
optimiser and declared once, in :class:`LocalOptimizerOptions`: element-wise gradient clipping (a
step hook, :func:`baselines.engine.local_training.clip_grad_value`) and whether a client's optimiser
state persists from one round to its next (then it is kept in the client's state,
``ClientJob.state``, under ``optimizer/``, and saved with the run, so ``--resume`` restores it
exactly; :mod:`baselines.optimizers.state`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from baselines.options import build_options, option


@dataclass(frozen=True)
class LocalOptimizerOptions:
    """Options every local optimiser has.

    Raises:
        ValueError: for a clipping value that is not > 0.
    """

    max_grad_value: float | None = option(
        None,
        help="clip every entry of every local gradient to [-c, c] before the step "
        "(element-wise clipping; unset: none).",
    )
    persist_state: bool = option(
        False,
        key="persist_optimizer_state",
        flag="--persist-optimizer-state",
        help="keep each client's optimiser state (moments, preconditioners) from one of its "
        "rounds to its next, saved with the run (default: a fresh optimiser every round).",
    )

    def __post_init__(self) -> None:
        if self.max_grad_value is not None and not self.max_grad_value > 0:
            raise ValueError(f"--max-grad-value must be > 0, got {self.max_grad_value}")


class Optimizer(ABC):
    """Base class of local optimisers: options in, ``torch.optim.Optimizer`` out.

    Args:
        options: the optimiser's options object (an instance of its ``option_classes[0]``).
        local: the options common to every optimiser (clipping, state persistence).
    """

    name: ClassVar[str] = ""
    #: the options dataclasses of the optimiser (see :mod:`baselines.options`); the first is its
    #: own, :class:`LocalOptimizerOptions` is added to every optimiser's.
    option_classes: ClassVar[tuple[type, ...]] = ()

    def __init__(self, options: Any, local: LocalOptimizerOptions | None = None) -> None:
        self.options = options
        self.local = local or LocalOptimizerOptions()

    @classmethod
    def from_options(cls, values: Mapping[str, Any]) -> Optimizer:
        """The optimiser from option keys (its own options and the common ones).

        Args:
            values: option key -> value (keys of other components are ignored).

        Returns:
            The optimiser factory.
        """
        return cls(
            build_options(cls.option_classes[0], values),
            build_options(LocalOptimizerOptions, values),
        )

    @property
    def lr(self) -> float:
        """The learning rate."""
        return float(self.options.lr)

    @property
    def persistent(self) -> bool:
        """Whether a client's optimiser state is kept across its rounds."""
        return self.local.persist_state

    @abstractmethod
    def __call__(self, parameters: Iterable[torch.nn.Parameter]) -> torch.optim.Optimizer:
        """A fresh optimiser over ``parameters``.

        Args:
            parameters: the trainable parameters.

        Returns:
            The optimiser.
        """
