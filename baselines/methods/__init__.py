"""Client methods (what a client trains and sends) and the registry that maps names to them."""

from __future__ import annotations

from baselines.methods.base import Method
from baselines.methods.dp_fedavg import DPFedAvg, DPLoRA
from baselines.methods.full import FullFineTuning
from baselines.methods.lora import LoRA

METHODS: dict[str, type[Method]] = {
    cls.name: cls for cls in (FullFineTuning, LoRA, DPFedAvg, DPLoRA)
}

__all__ = ["METHODS", "DPFedAvg", "DPLoRA", "FullFineTuning", "LoRA", "Method"]
