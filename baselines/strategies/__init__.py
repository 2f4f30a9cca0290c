"""Server strategies, one per module, and the registry that maps names to them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from baselines.options import discover
from baselines.strategies.base import Strategy, StrategyOptions
from baselines.strategies.fedadam import FedAdam
from baselines.strategies.fedavg import FedAvg
from baselines.strategies.fedavgm import FedAvgM, FedAvgMOptions
from baselines.strategies.fedopt import FedOpt, FedOptOptions
from baselines.strategies.fedyogi import FedYogi

#: name -> strategy class, every module of this package (a new strategy is one new file).
STRATEGIES: dict[str, type[Strategy]] = discover(__name__, Strategy)


def get_strategy(name: str, values: Mapping[str, Any]) -> Strategy:
    """Build a strategy by name.

    Args:
        name: one of :data:`STRATEGIES`.
        values: option key -> value (the strategy reads the keys of its own options).

    Returns:
        The strategy.

    Raises:
        ValueError: for an unknown name or an invalid option.
    """
    if name not in STRATEGIES:
        raise ValueError(f"unknown strategy {name!r}; choose one of {sorted(STRATEGIES)}")
    return STRATEGIES[name].from_options(values)


def parents_first() -> list[type[Strategy]]:
    """The strategies, each after the strategy it extends (FedAvg, FedAvgM, FedAdam, FedYogi).

    Their options read in this order are those every strategy shares, then each strategy's own
    after its parent's: the order ``pflkit train --help`` lists them in.
    """
    return sorted(STRATEGIES.values(), key=lambda cls: len(cls.__mro__))


__all__ = [
    "STRATEGIES",
    "FedAdam",
    "FedAvg",
    "FedAvgM",
    "FedAvgMOptions",
    "FedOpt",
    "FedOptOptions",
    "FedYogi",
    "Strategy",
    "StrategyOptions",
    "get_strategy",
    "parents_first",
]
