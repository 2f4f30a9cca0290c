"""AdamW with 8-bit optimiser states (bitsandbytes), for full fine-tuning in less memory.

Dettmers, Lewis, Shleifer and Zettlemoyer 2022, "8-bit Optimizers via Block-wise Quantization"
(https://arxiv.org/abs/2110.02861), as ``bitsandbytes.optim.AdamW8bit``: both moments of every
tensor of at least 4,096 values are kept block-wise quantised in 8 bits (smaller tensors keep
fp32 states), so AdamW's state for VT5-base's 250M trained values takes about 0.5 GB instead of
2 GB. The update is AdamW's up to the states' quantisation; it runs on CUDA and on the CPU.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from baselines.optimizers.adamw import AdamWOptions
from baselines.optimizers.base import LocalOptimizerOptions, Optimizer


class AdamW8bit(Optimizer):
    """``bitsandbytes.optim.AdamW8bit`` with the options' learning rate and weight decay (the
    same option keys as ``adamw``, so a preset switches with ``--optimizer adamw8bit``)."""

    name = "adamw8bit"
    option_classes = (AdamWOptions, LocalOptimizerOptions)

    def __call__(self, parameters: Iterable[torch.nn.Parameter]) -> torch.optim.Optimizer:
        """A fresh 8-bit AdamW over ``parameters``."""
        from bitsandbytes.optim import AdamW8bit as BitsAndBytesAdamW8bit

        return BitsAndBytesAdamW8bit(
            list(parameters), lr=self.options.lr, weight_decay=self.options.weight_decay
        )
