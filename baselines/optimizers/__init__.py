"""Local optimisers, one per module, and the registry that maps names to them."""

from __future__ import annotations

from baselines.optimizers.base import Optimizer
from baselines.options import discover

#: name -> optimiser class, every module of this package (a new optimiser is one new file).
OPTIMIZERS: dict[str, type[Optimizer]] = discover(__name__, Optimizer)

__all__ = ["OPTIMIZERS", "Optimizer"]
