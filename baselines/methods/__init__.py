"""Client methods (what a client trains and sends) and the registry that maps names to them."""

from __future__ import annotations

from baselines.methods.base import Method, RunShape
from baselines.methods.dp_fedavg import DPFedAvg, DPLoRA
from baselines.methods.full import FullFineTuning
from baselines.methods.lora import LoRA
from baselines.options import discover

#: name -> method class, every module of this package (a new method is one new file).
METHODS: dict[str, type[Method]] = discover(__name__, Method)

__all__ = ["METHODS", "DPFedAvg", "DPLoRA", "FullFineTuning", "LoRA", "Method", "RunShape"]
