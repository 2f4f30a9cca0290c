"""What local training is to a client's job: the trainer it calls and what that returns.

The engine's loop (:class:`baselines.engine.local_training.LocalTrainer`) is one
:class:`Trainer`; a :class:`~baselines.core.client_job.ClientJob` only calls :meth:`Trainer.train`
and reads its optimiser's ``persistent`` flag, so methods build on the job without importing the
engine.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch import nn

if TYPE_CHECKING:
    from datasets import Dataset

#: list of dataset rows -> model inputs with ``labels``.
Collate = Callable[[Sequence[dict[str, Any]]], dict[str, torch.Tensor]]
#: (batch, model outputs) -> the scalar loss to backpropagate.
LossHook = Callable[[dict[str, torch.Tensor], Any], torch.Tensor]


@dataclass
class TrainStats:
    """What one call of local training did.

    Attributes:
        steps: optimiser steps.
        examples: examples seen (epochs x dataset size).
        loss: mean training loss over all steps.
        seconds: wall time.
    """

    steps: int
    examples: int
    loss: float
    seconds: float

    def as_dict(self) -> dict[str, float]:
        """Plain dictionary for logs."""
        return {key: float(value) for key, value in asdict(self).items()}


class Trainer(Protocol):
    """The local optimisation loop a job trains with.

    Attributes:
        optimizer: builds the optimiser from the trainable parameters; a local optimiser whose
            ``persistent`` attribute is true keeps a client's optimiser state across rounds.
    """

    optimizer: Callable[[Sequence[nn.Parameter]], torch.optim.Optimizer]

    def train(
        self,
        model: nn.Module,
        dataset: Dataset,
        *,
        seed: int,
        loss: LossHook | None = None,
        epochs: int | None = None,
        optimizer_state: dict[str, torch.Tensor] | None = None,
    ) -> TrainStats:
        """Train ``model`` in place on ``dataset`` (see ``LocalTrainer.train``).

        Args:
            model: the model; only parameters with ``requires_grad`` are optimised.
            dataset: rows to train on.
            seed: seeds the shuffling and dropout.
            loss: the loss of a batch from the model's outputs (``None``: ``outputs.loss``).
            epochs: epochs of this call (``None``: the trainer's local epochs).
            optimizer_state: a client's saved optimiser state, loaded and written back
                (``None``: a fresh optimiser whose state is dropped).

        Returns:
            Statistics of the call.
        """
        ...
