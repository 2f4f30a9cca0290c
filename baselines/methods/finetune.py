"""Local fine-tuning after federation: the two track-3 baselines, ``local-only`` and ``fedavg-ft``.

Federated rounds run as full fine-tuning (FedAvg in the presets). After the last round every
client fine-tunes its own copy of the final global model on its own data for E epochs
(``--finetune-epochs``, the run's optimiser and learning rate) and keeps the result as its
personal model (``ClientJob.state``: the fine-tuned values of the trained parameters). This is
the classic FedAvg + local fine-tuning baseline of personalised FL (e.g. pFedCR's global
training then one epoch of local fine-tuning).

- ``fedavg-ft``: the ``fedavg`` recipe (10 rounds, 2 of 10 clients), then 1 epoch of local
  fine-tuning. The server sends the final global model to each of the K clients (round 11 of the
  log, downlink only); fine-tuning itself sends nothing.
- ``local-only``: no federated round; each client fine-tunes the shipped base on its own data
  for 2 epochs (on average ``fedavg`` trains each client's data 10 x 2/10 = 2 epochs) and sends
  nothing: the global model is the base and the log is empty.

``--finetune-epochs 0`` skips the fine-tuning: every personalisation is empty and the run is the
global model alone, as a track-3 submission.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from baselines.core.client_job import ClientJob
from baselines.core.parameters import get_values, select_communicated, set_values
from baselines.methods.base import RunShape
from baselines.methods.full import VISUAL_ENCODER, FullFineTuning, FullFineTuningOptions
from baselines.optimizers.adamw import OFFICIAL_WEIGHT_DECAY
from baselines.options import build_options, option


@dataclass(frozen=True)
class FineTuneOptions:
    """Options of local fine-tuning.

    Raises:
        ValueError: for a negative number of epochs.
    """

    key_prefix: ClassVar[str] = "finetune_"
    epochs: int = option(
        1,
        help="fine-tuning: epochs each client fine-tunes the final global model on its own "
        "data after the last round (0: no fine-tuning, every client uses the global model).",
    )

    def __post_init__(self) -> None:
        if self.epochs < 0:
            raise ValueError(f"--finetune-epochs must be >= 0, got {self.epochs}")


_FEDAVG_SHAPE: dict[str, Any] = {
    "method": "finetune",
    "strategy": "fedavg",
    "optimizer": "adamw",
    "clients_per_round": 2,
    "local_epochs": 1,
    "lr": 2e-4,
    "weight_decay": OFFICIAL_WEIGHT_DECAY,
    "wire": "fp32",
}


class LocalFineTuning(FullFineTuning):
    """Full fine-tuning in the rounds, then every client fine-tunes the global model locally.

    Args:
        frozen: parameter-name prefixes kept frozen (never sent, never fine-tuned).
        epochs: local fine-tuning epochs after the last round.

    Raises:
        ValueError: for a negative number of epochs.
    """

    name = "finetune"
    personal = True
    option_classes = (*FullFineTuning.option_classes, FineTuneOptions)
    presets: ClassVar[dict[str, dict[str, Any]]] = {
        "fedavg-ft": {**_FEDAVG_SHAPE, "rounds": 10, "finetune_epochs": 1},
        "local-only": {**_FEDAVG_SHAPE, "rounds": 0, "finetune_epochs": 2},
    }

    def __init__(self, frozen: tuple[str, ...] = (VISUAL_ENCODER,), *, epochs: int = 1) -> None:
        super().__init__(frozen)
        self.epochs = FineTuneOptions(epochs=epochs).epochs

    @classmethod
    def from_options(cls, options: Mapping[str, Any], *, run: RunShape) -> LocalFineTuning:
        """Frozen prefixes and fine-tuning epochs from the options."""
        return cls(
            build_options(FullFineTuningOptions, options).frozen,
            epochs=build_options(FineTuneOptions, options).epochs,
        )

    def personalises(self) -> bool:
        """Fine-tune every client, unless the epochs are 0."""
        return self.epochs > 0

    def personalise(self, job: ClientJob) -> None:
        """Fine-tune from the final global weights; keep the trained values as the state."""
        job.reset()
        job.train(epochs=self.epochs)
        job.state.clear()
        job.state.update(get_values(job.model, job.parameters))

    def personal_model(self, model: nn.Module, state: Mapping[str, torch.Tensor]) -> nn.Module:
        """The global model with the client's fine-tuned values (the global one without)."""
        if state:
            set_values(model, select_communicated(model, prefix=self.prefix), state)
        return model

    def describe(self) -> dict[str, Any]:
        """Name, frozen prefixes and fine-tuning epochs."""
        return {**super().describe(), "finetune_epochs": self.epochs}
