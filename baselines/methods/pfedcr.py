"""pFedCR: global federated training, then per client fine-tune, average with the global model
and fine-tune the attention layers alone.

pFedCR, personalised federated learning for Chinese text recognition (its abstract:
``shared/seeds/pfedcr-abstract.txt``; the authors and full text are not in the seeds). Stage 1
is multi-round global training; stage 2, on every client: "the global model is fine-tuned for
one epoch to create a local model. Parameter averaging between local and global models combines
personalized and global feature extraction capabilities. Finally, we fine-tune only the
attention layers".

Adaptations to a generative VT5 (the paper's model is an attention CRNN):

- Stage 1 is FedAvg full fine-tuning, the ``fedavg`` recipe (10 rounds, 2 of 10 clients, AdamW
  lr 2e-4; the visual encoder frozen and never sent). The paper's other stage-1 parts are not
  carried over: the attention module it adds to the CRNN exists already in VT5 (every T5 block
  has self- and cross-attention), and the server-side balanced character set has no counterpart
  here (the server holds no data in this benchmark, and answers are generated, not classified).
- Stage 2 runs after the last round (``Method.personalise``; the final global model is sent to
  each client, round R + 1 of the log): ``--finetune-epochs`` (1) epochs of full fine-tuning,
  then ``w = mix * w_local + (1 - mix) * w_global`` on every trained tensor (``--pfedcr-mix``,
  0.5: the abstract's "parameter averaging"), then ``--pfedcr-attention-epochs`` (1) epochs that
  train only the T5 attention layers (``SelfAttention`` and ``EncDecAttention``: q, k, v, o and
  the relative position bias), the rest frozen at its averaged value. The paper gives neither
  the mixing weight nor the attention epochs; these are our choices.
- The personalisation is the resulting values of every trained tensor (``ClientJob.state``);
  stage 2 sends nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from baselines.core.client_job import ClientJob
from baselines.core.parameters import get_values, parameter_map, set_values
from baselines.methods.base import RunShape
from baselines.methods.finetune import FineTuneOptions, LocalFineTuning
from baselines.methods.full import VISUAL_ENCODER, FullFineTuningOptions
from baselines.options import build_options, option

#: parameter-name fragments of the T5 attention layers (self- and cross-attention).
ATTENTION = (".SelfAttention.", ".EncDecAttention.")


@dataclass(frozen=True)
class PFedCROptions:
    """Options of pFedCR's personalisation stage.

    Raises:
        ValueError: for a mix outside [0, 1] or negative epochs.
    """

    key_prefix: ClassVar[str] = "pfedcr_"
    mix: float = option(
        0.5,
        help="pFedCR: weight of the locally fine-tuned model in the average with the global "
        "one (w = mix * local + (1 - mix) * global).",
    )
    attention_epochs: int = option(
        1,
        help="pFedCR: epochs that fine-tune only the attention layers after the averaging "
        "(0: none).",
    )

    def __post_init__(self) -> None:
        if not 0.0 <= self.mix <= 1.0:
            raise ValueError(f"--pfedcr-mix must be in [0, 1], got {self.mix}")
        if self.attention_epochs < 0:
            raise ValueError(f"--pfedcr-attention-epochs must be >= 0, got {self.attention_epochs}")


def average_parameters(
    local: Mapping[str, torch.Tensor], global_: Mapping[str, torch.Tensor], *, mix: float
) -> dict[str, torch.Tensor]:
    """pFedCR's parameter averaging: ``mix * local + (1 - mix) * global`` for every tensor.

    Args:
        local: the locally fine-tuned values.
        global_: the global model's values (same names and shapes).
        mix: weight of the local values, in [0, 1].

    Returns:
        Name -> the averaged tensor.

    Raises:
        ValueError: when the names differ or mix is outside [0, 1].
    """
    if not 0.0 <= mix <= 1.0:
        raise ValueError(f"mix must be in [0, 1], got {mix}")
    if set(local) != set(global_):
        raise ValueError(
            f"local and global tensors differ: {sorted(set(local) ^ set(global_))[:3]}"
        )
    return {name: mix * local[name] + (1.0 - mix) * global_[name] for name in local}


def is_attention(name: str) -> bool:
    """Whether a parameter belongs to a T5 attention layer."""
    return any(fragment in name for fragment in ATTENTION)


@contextmanager
def only_attention_trainable(live: Mapping[str, nn.Parameter]) -> Iterator[int]:
    """Freeze the communicated parameters outside the attention layers; restore on exit.

    Args:
        live: the model's communicated parameters by name (:func:`parameter_map`).

    Yields:
        The number of attention tensors left trainable.

    Raises:
        ValueError: when no communicated parameter is an attention layer.
    """
    frozen = [p for name, p in live.items() if not is_attention(name) and p.requires_grad]
    trainable = sum(1 for name in live if is_attention(name))
    if not trainable:
        raise ValueError(
            "pFedCR found no attention layer (SelfAttention, EncDecAttention) "
            "among the trained parameters; do not freeze them"
        )
    for parameter in frozen:
        parameter.requires_grad_(False)
    try:
        yield trainable
    finally:
        for parameter in frozen:
            parameter.requires_grad_(True)


class PFedCR(LocalFineTuning):
    """FedAvg rounds, then per client: fine-tune, average with the global model, tune attention.

    Args:
        frozen: parameter-name prefixes kept frozen (never sent, never fine-tuned).
        epochs: full fine-tuning epochs of stage 2.
        mix: weight of the local model in the average.
        attention_epochs: attention-only epochs after the average.
    """

    name = "pfedcr"
    option_classes = (*LocalFineTuning.option_classes, PFedCROptions)
    presets: ClassVar[dict[str, dict[str, Any]]] = {
        "pfedcr": {
            "extends": "fedavg",
            "method": "pfedcr",
            "finetune_epochs": 1,
            "pfedcr_mix": 0.5,
            "pfedcr_attention_epochs": 1,
        },
    }

    def __init__(
        self,
        frozen: tuple[str, ...] = (VISUAL_ENCODER,),
        *,
        epochs: int = 1,
        mix: float = 0.5,
        attention_epochs: int = 1,
    ) -> None:
        super().__init__(frozen, epochs=epochs)
        options = PFedCROptions(mix=mix, attention_epochs=attention_epochs)
        self.mix = options.mix
        self.attention_epochs = options.attention_epochs

    @classmethod
    def from_options(cls, options: Mapping[str, Any], *, run: RunShape) -> PFedCR:
        """Frozen prefixes, fine-tuning epochs, mix and attention epochs from the options."""
        own = build_options(PFedCROptions, options)
        return cls(
            build_options(FullFineTuningOptions, options).frozen,
            epochs=build_options(FineTuneOptions, options).epochs,
            mix=own.mix,
            attention_epochs=own.attention_epochs,
        )

    def personalises(self) -> bool:
        """Stage 2 runs unless both of its training steps are switched off."""
        return self.epochs > 0 or self.attention_epochs > 0

    def personalise(self, job: ClientJob) -> None:
        """Fine-tune, average with the received global model, fine-tune attention; keep it."""
        job.reset()
        if self.epochs > 0:
            job.train(epochs=self.epochs)
        averaged = average_parameters(
            get_values(job.model, job.parameters), job.start_weights, mix=self.mix
        )
        set_values(job.model, job.parameters, averaged)
        if self.attention_epochs > 0:
            with only_attention_trainable(parameter_map(job.model, job.parameters)):
                job.train(epochs=self.attention_epochs)
        job.state.clear()
        job.state.update(get_values(job.model, job.parameters))

    def describe(self) -> dict[str, Any]:
        """Name, frozen prefixes, fine-tuning epochs, mix and attention epochs."""
        return {**super().describe(), "mix": self.mix, "attention_epochs": self.attention_epochs}
