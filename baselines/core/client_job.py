"""What one sampled client does in a round: the job it receives.

A :class:`ClientJob` holds everything a client has in a round: the model with the round's starting
weights loaded, those weights as received, its local data (with the ``provider`` column, so a
provider-level DP rule can group it) and the local trainer. A method's ``compute_update`` turns a
job into a :class:`~baselines.core.client_update.ClientUpdate`; the default
(:func:`local_training_update`) is plain local training on all the client's data, and a DP
method can instead train once per sampled provider from the same starting weights
(:meth:`ClientJob.reset`, :meth:`ClientJob.train`, :meth:`ClientJob.delta`), clip and add noise,
without touching the round loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from torch import nn

from baselines.core.client_update import ClientUpdate
from baselines.core.parameters import (
    CommunicatedParameters,
    get_values,
    parameter_map,
    set_values,
)

if TYPE_CHECKING:
    from datasets import Dataset

    from baselines.core.training import LossHook, Trainer, TrainStats


@dataclass
class ClientJob:
    """One client's work in one round.

    Attributes:
        federated_round: 1-based round.
        client: client id.
        model: the trainable model, starting weights loaded.
        parameters: the communicated set.
        start_weights: the starting weights as the client decoded them from the wire.
        dataset: the client's local data (a ``datasets.Dataset`` with a ``provider`` column).
        trainer: the local optimisation loop.
        seed: the seed of this client in this round (shuffling, dropout).
        state: the method's state for this client, kept across rounds and saved with the run
            (``--resume`` restores it exactly); the method reads and changes it in place.
        loss: the method's loss hook for this job (``None``: the model's own loss).
    """

    federated_round: int
    client: int
    model: nn.Module
    parameters: CommunicatedParameters
    start_weights: Mapping[str, torch.Tensor]
    dataset: Dataset
    trainer: Trainer
    seed: int
    state: dict[str, torch.Tensor] = field(default_factory=dict)
    loss: LossHook | None = None
    _start_on_device: tuple[torch.device, dict[str, torch.Tensor]] | None = field(
        default=None, repr=False
    )

    def reset(self) -> None:
        """Load the round's starting weights back into the model."""
        set_values(self.model, self.parameters, self.start_weights)

    def train(
        self,
        dataset: Dataset | None = None,
        *,
        seed: int | None = None,
        epochs: int | None = None,
        keep_optimizer_state: bool = False,
    ) -> TrainStats:
        """Run local training from the model's current weights.

        Args:
            dataset: the data to train on (default: all the client's data).
            seed: shuffling/dropout seed (default: the job's seed).
            epochs: epochs over the data (default: the run's local epochs).
            keep_optimizer_state: start the optimiser from the client's saved state and save its
                state back (``state["optimizer/..."]``); a per-provider DP update never does,
                so no provider's data reaches another provider's update.

        Returns:
            The trainer's statistics.
        """
        data = self.dataset if dataset is None else dataset
        return self.trainer.train(
            self.model,
            data,
            seed=self.seed if seed is None else seed,
            loss=self.loss,
            epochs=epochs,
            optimizer_state=self.state if keep_optimizer_state else None,
        )

    def delta(self) -> dict[str, torch.Tensor]:
        """Current communicated values minus the starting weights."""
        current = get_values(self.model, self.parameters)
        return {name: current[name] - self.start_weights[name] for name in self.parameters.names}

    def start_weights_on(self, device: torch.device) -> Mapping[str, torch.Tensor]:
        """The starting weights on the device the model trains on, for a loss term (copied once
        per job; on the CPU they are the received tensors themselves)."""
        if device.type == "cpu":
            return self.start_weights
        if self._start_on_device is None or self._start_on_device[0] != device:
            moved = {name: value.to(device) for name, value in self.start_weights.items()}
            self._start_on_device = (device, moved)
        return self._start_on_device[1]

    def live_parameters(self) -> dict[str, torch.Tensor]:
        """The model's communicated parameters by canonical name, live (for a loss term)."""
        return parameter_map(self.model, self.parameters)

    def indices_by_provider(self) -> dict[str, list[int]]:
        """Row indices of the client's data grouped by provider (sorted by provider name)."""
        groups: dict[str, list[int]] = {}
        for index, provider in enumerate(self.dataset["provider"]):
            groups.setdefault(provider, []).append(index)
        return dict(sorted(groups.items()))


def local_training_update(job: ClientJob) -> ClientUpdate:
    """The FedAvg client: train on all local data from the starting weights, send the delta.

    When the local optimiser declares ``persist_optimizer_state``, the client's optimiser state
    (moments, Shampoo's preconditioners) continues from its previous round.

    Args:
        job: the client's job.

    Returns:
        The update, weighted by the number of local examples.
    """
    job.reset()
    stats = job.train(keep_optimizer_state=getattr(job.trainer.optimizer, "persistent", False))
    return ClientUpdate(job.delta(), num_examples=len(job.dataset), metrics=stats.as_dict())
