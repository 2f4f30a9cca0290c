"""FedOpt: the family of server-side adaptive optimisers on the clients' mean update.

Reddi et al. 2021, "Adaptive Federated Optimization", ICLR (https://arxiv.org/abs/2003.00295),
Algorithm 2: the mean update ``Delta_t`` acts as a pseudo-gradient,
``m_t = beta1 m_{t-1} + (1 - beta1) Delta_t``, a method-specific second moment ``v_t``
(initialised to ``tau^2``), and ``x_{t+1} = x_t + eta m_t / (sqrt(v_t) + tau)``. Subclasses
(:class:`~baselines.strategies.fedadam.FedAdam`, :class:`~baselines.strategies.fedyogi.FedYogi`)
only define the second moment.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from baselines.core.client_update import ClientUpdate
from baselines.options import option
from baselines.strategies.aggregation import adaptive_step, apply_update, first_moment
from baselines.strategies.base import StrategyOptions, check_decay, pack_state, unpack_state
from baselines.strategies.fedavg import FedAvg


@dataclass(frozen=True)
class FedOptOptions(StrategyOptions):
    """Options of FedAdam and FedYogi: every strategy's, and the moments'."""

    beta1: float = option(0.9, help="first-moment decay of FedAdam / FedYogi.")
    beta2: float = option(0.99, help="second-moment decay of FedAdam / FedYogi.")
    tau: float = option(1e-3, help="adaptivity of FedAdam / FedYogi (v_{-1} = tau^2).")

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("beta1", "beta2"):
            check_decay(name, getattr(self, name))
        if not self.tau > 0:
            raise ValueError(f"tau must be > 0, got {self.tau}")


class FedOpt(FedAvg):
    """Base of the adaptive server optimisers (moments kept per communicated tensor)."""

    name = "fedopt"
    default_server_lr = 1e-2
    option_classes = (FedOptOptions,)
    config: FedOptOptions

    def __init__(self, config: FedOptOptions) -> None:
        super().__init__(config)
        self.m: dict[str, torch.Tensor] | None = None
        self.v: dict[str, torch.Tensor] | None = None

    @abstractmethod
    def second_moment(
        self, v: Mapping[str, torch.Tensor], delta: Mapping[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """``v_t`` from ``v_{t-1}`` and ``Delta_t``."""

    def aggregate_fit(
        self,
        federated_round: int,
        weights: Mapping[str, torch.Tensor],
        results: Sequence[ClientUpdate],
    ) -> dict[str, torch.Tensor]:
        """One server optimiser step on the clients' mean update."""
        delta = self.average(results)
        if self.v is None:
            tau2 = self.config.tau**2
            self.v = {name: torch.full_like(value, tau2) for name, value in delta.items()}
        self.m = first_moment(self.m, delta, self.config.beta1)
        self.v = self.second_moment(self.v, delta)
        return apply_update(weights, adaptive_step(self.m, self.v, self.config.tau), self.server_lr)

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The two moments."""
        return pack_state(m=self.m, v=self.v)

    def load_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        """Restore the two moments."""
        self.m = unpack_state(state, "m")
        self.v = unpack_state(state, "v")
