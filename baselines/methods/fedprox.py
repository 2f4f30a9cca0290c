"""FedProx: full fine-tuning with a proximal term that keeps local models near the global one.

Li et al. 2020, "Federated Optimization in Heterogeneous Networks", MLSys
(https://arxiv.org/abs/1812.06127), Eq. (2): client k minimises
``h_k(w; w^t) = F_k(w) + (mu / 2) ||w - w^t||^2`` from the round's global weights ``w^t``. Here
``w`` ranges over the communicated parameters (each tied storage once) and ``w^t`` is what the
client decoded from the wire. The server side is unchanged (any strategy; FedAvg in the preset),
and ``mu = 0`` is FedAvg. The whole method is this file: its options, its preset and the loss
hook of the client loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from baselines.core.client_job import ClientJob
from baselines.methods.base import RunShape
from baselines.methods.full import VISUAL_ENCODER, FullFineTuning, FullFineTuningOptions
from baselines.options import build_options, option


@dataclass(frozen=True)
class FedProxOptions:
    """Options of FedProx.

    Raises:
        ValueError: for a negative mu.
    """

    key_prefix: ClassVar[str] = "fedprox_"
    mu: float = option(
        0.01,
        help="FedProx: weight mu of the proximal term (mu / 2) ||w - w_global||^2 (0: FedAvg).",
    )

    def __post_init__(self) -> None:
        if not self.mu >= 0:
            raise ValueError(f"--fedprox-mu must be >= 0 (0 is FedAvg), got {self.mu}")


class FedProx(FullFineTuning):
    """Full fine-tuning whose local loss adds ``(mu / 2) ||w - w^t||^2``.

    Args:
        frozen: parameter-name prefixes kept frozen and never sent.
        mu: the proximal weight.

    Raises:
        ValueError: for a negative mu.
    """

    name = "fedprox"
    option_classes = (*FullFineTuning.option_classes, FedProxOptions)
    #: the ``fedavg`` recipe (10 rounds, 2 of 10 clients, AdamW lr 2e-4, FedAvg) with mu 0.01.
    presets: ClassVar[dict[str, dict[str, Any]]] = {
        "fedprox": {"extends": "fedavg", "method": "fedprox", "fedprox_mu": 0.01},
    }

    def __init__(self, frozen: tuple[str, ...] = (VISUAL_ENCODER,), *, mu: float = 0.01) -> None:
        super().__init__(frozen)
        self.mu = FedProxOptions(mu=mu).mu

    @classmethod
    def from_options(cls, options: Mapping[str, Any], *, run: RunShape) -> FedProx:
        """Frozen prefixes and mu from the options."""
        return cls(
            build_options(FullFineTuningOptions, options).frozen,
            mu=build_options(FedProxOptions, options).mu,
        )

    def local_loss(self, job: ClientJob, batch: Mapping[str, Any], outputs: Any) -> torch.Tensor:
        """The model's loss plus ``(mu / 2) ||w - w^t||^2`` over the communicated parameters."""
        if self.mu == 0:
            return outputs.loss
        live = job.live_parameters()
        start = job.start_weights_on(next(iter(live.values())).device)
        proximal = sum((live[name].float() - start[name]).pow(2).sum() for name in live)
        return outputs.loss + 0.5 * self.mu * proximal

    def describe(self) -> dict[str, Any]:
        """Name, frozen prefixes and mu."""
        return {**super().describe(), "mu": self.mu}
