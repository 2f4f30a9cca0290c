"""Server strategies, one per module, and the registry that maps names to them."""

from __future__ import annotations

from baselines.options import discover
from baselines.strategies.base import Strategy, StrategyConfig
from baselines.strategies.fedadam import FedAdam
from baselines.strategies.fedavg import FedAvg
from baselines.strategies.fedavgm import FedAvgM
from baselines.strategies.fedopt import FedOpt
from baselines.strategies.fedyogi import FedYogi

#: name -> strategy class, every module of this package (a new strategy is one new file).
STRATEGIES: dict[str, type[Strategy]] = discover(__name__, Strategy)


def get_strategy(name: str, config: StrategyConfig) -> Strategy:
    """Build a strategy by name.

    Args:
        name: one of :data:`STRATEGIES`.
        config: the shared options.

    Returns:
        The strategy.

    Raises:
        ValueError: for an unknown name.
    """
    if name not in STRATEGIES:
        raise ValueError(f"unknown strategy {name!r}; choose one of {sorted(STRATEGIES)}")
    return STRATEGIES[name](config)


__all__ = ["STRATEGIES", "FedAdam", "FedAvg", "FedAvgM", "FedOpt", "FedYogi", "Strategy",
           "StrategyConfig", "get_strategy"]
