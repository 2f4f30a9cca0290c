"""The strategy interface: how the server samples clients and combines their updates.

As in Flower, a strategy has a handful of hooks (``configure_fit`` picks the round's clients,
``aggregate_fit`` turns the clients' updates into the next global weights, ``state_dict`` /
``load_state_dict`` persist server optimiser state for ``--resume``); the round loop in
`baselines.engine.simulation` drives them. A strategy owns its options, as a method does: the
options every strategy shares live in [StrategyOptions][], documented once, and a strategy
with options of its own extends it (`FedAvgMOptions` (`baselines.strategies.fedavgm`),
`FedOptOptions` (`baselines.strategies.fedopt`)) and names that class in ``option_classes``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from baselines.core.client_update import ClientUpdate
from baselines.options import build_options, option


@dataclass(frozen=True)
class StrategyOptions:
    """Options of every strategy.

    The command line reads each field's declared ``help``; the ``Attributes:`` below are the API
    reference's copy of it (``tests/baselines/test_option_help.py`` keeps the two equal).

    Attributes:
        clients_per_round: M, clients sampled (without replacement) each round.
        weighted: weight client updates by their number of examples (--unweighted: a plain
            mean).
        server_lr: server learning rate eta (unset: the strategy's default, 1 for FedAvg and
            FedAvgM, 1e-2 for FedAdam and FedYogi).
    """

    clients_per_round: int = option(2, help="M, clients sampled (without replacement) each round.")
    weighted: bool = option(
        True,
        flag="--unweighted",
        negate=True,
        help="weight client updates by their number of examples (--unweighted: a plain mean).",
    )
    server_lr: float | None = option(
        None,
        help="server learning rate eta (unset: the strategy's default, 1 for FedAvg and "
        "FedAvgM, 1e-2 for FedAdam and FedYogi).",
    )

    def __post_init__(self) -> None:
        if self.clients_per_round < 1:
            raise ValueError(f"clients per round must be >= 1, got {self.clients_per_round}")
        if self.server_lr is not None and not self.server_lr > 0:
            raise ValueError(f"server learning rate must be > 0, got {self.server_lr}")


def check_decay(name: str, value: float) -> None:
    """Refuse a momentum or moment decay outside [0, 1).

    Raises:
        ValueError: naming the option.
    """
    if not 0 <= value < 1:
        raise ValueError(f"{name} must be in [0, 1), got {value}")


class Strategy(ABC):
    """Base class of server strategies.

    Args:
        config: the strategy's options (an instance of its ``option_classes[0]``).
    """

    name: ClassVar[str] = ""
    default_server_lr: float = 1.0
    option_classes: ClassVar[tuple[type[StrategyOptions], ...]] = (StrategyOptions,)
    """The options dataclass of the strategy (see `baselines.options`): one class, which extends
    [StrategyOptions][] with the strategy's own fields.
    """

    def __init__(self, config: StrategyOptions) -> None:
        self.config = config

    @classmethod
    def from_options(cls, values: Mapping[str, Any]) -> Strategy:
        """Build the strategy from its options.

        Args:
            values: option key -> value (only the keys of ``option_classes`` are read).

        Returns:
            The strategy.

        Raises:
            ValueError: naming the invalid option.
        """
        return cls(build_options(cls.option_classes[0], values))

    @property
    def server_lr(self) -> float:
        """The server learning rate in use."""
        lr = self.config.server_lr
        return self.default_server_lr if lr is None else lr

    def configure_fit(self, federated_round: int, num_clients: int, *, seed: int) -> list[int]:
        """Sample the round's clients: M of K without replacement, seeded by (seed, round).

        Args:
            federated_round: 1-based round.
            num_clients: K.
            seed: the run's seed.

        Returns:
            Sorted client ids.

        Raises:
            ValueError: if M > K.
        """
        m = self.config.clients_per_round
        if m > num_clients:
            raise ValueError(
                f"{m} clients per round but the federation has only {num_clients} clients; "
                f"lower --clients-per-round to at most {num_clients}"
            )
        rng = np.random.default_rng([seed, federated_round])
        return sorted(int(c) for c in rng.choice(num_clients, size=m, replace=False))

    def average(self, results: Sequence[ClientUpdate]) -> dict[str, torch.Tensor]:
        """The clients' mean update Delta_t (by examples if ``weighted``)."""
        from baselines.strategies.aggregation import weighted_average

        weights = [r.num_examples if self.config.weighted else 1.0 for r in results]
        return weighted_average([r.delta for r in results], weights)

    @abstractmethod
    def aggregate_fit(
        self,
        federated_round: int,
        weights: Mapping[str, torch.Tensor],
        results: Sequence[ClientUpdate],
    ) -> dict[str, torch.Tensor]:
        """Combine the clients' updates into the next global weights.

        Args:
            federated_round: 1-based round.
            weights: the global weights the round started from (full precision).
            results: the decoded client updates.

        Returns:
            The new global weights.
        """

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Server optimiser state to save for ``--resume`` (none by default)."""
        return {}

    def load_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        """Restore the state saved by [state_dict][]."""
        if state:
            raise ValueError(f"strategy {self.name} keeps no state but got {len(state)} tensors")


def pack_state(**groups: Mapping[str, torch.Tensor] | None) -> dict[str, torch.Tensor]:
    """Flatten named groups of tensors into one dictionary (``group/name``)."""
    return {
        f"{group}/{name}": tensor
        for group, tensors in groups.items()
        if tensors is not None
        for name, tensor in tensors.items()
    }


def unpack_state(state: Mapping[str, torch.Tensor], group: str) -> dict[str, torch.Tensor] | None:
    """The tensors of one group of [pack_state][], or ``None`` when the group is empty."""
    prefix = f"{group}/"
    found = {key[len(prefix) :]: value for key, value in state.items() if key.startswith(prefix)}
    return found or None
