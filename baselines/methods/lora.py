"""LoRA through peft: the track-1 winner's method.

Hu et al. 2022, "LoRA: Low-Rank Adaptation of Large Language Models"
(https://arxiv.org/abs/2106.09685): a frozen linear layer ``W`` becomes ``W + (alpha / r) B A``
with ``A`` (r x in) and ``B`` (out x r) trained and ``B`` initialised to zero. As in the winning
recipe, adapters sit on the T5 attention ``q`` and ``v`` projections of the language backbone by
default, the spatial embedding and the visual projection are trained fully, and everything else is
frozen. Adapters are initialised from the run's shared seed, so server and clients build the same
ones without a download or a message. For the submission the adapters are merged into ``W``.
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from baselines.methods.base import Method, RunShape, match_prefixes
from baselines.options import build_options, option

DEFAULT_TARGETS = ("q", "v")
DEFAULT_SCOPE = "language_backbone"
DEFAULT_FULLY_TRAINED = ("spatial_embedding.", "visual_embedding.visual_emb_matcher.")


@dataclass(frozen=True)
class LoRAOptions:
    """Options of LoRA (the ``lora`` and ``dp-lora`` methods)."""

    key_prefix: ClassVar[str] = "lora_"
    rank: int = option(6, help="LoRA rank r.")
    alpha: float | None = option(None, help="LoRA alpha (default 2 x rank).")
    targets: tuple[str, ...] = option(
        DEFAULT_TARGETS,
        help="Comma-separated module names that get adapters (T5: q, k, v, o, wi, wo).",
    )
    scope: str = option(
        DEFAULT_SCOPE, help='LoRA: module prefix adapters are restricted to ("" for anywhere).'
    )
    fully_trained: tuple[str, ...] = option(
        DEFAULT_FULLY_TRAINED,
        key="fully_trained",
        help="LoRA: comma-separated parameter-name prefixes trained and sent in full.",
    )
    dropout: float = option(0.0, help="LoRA dropout.")


class LoRA(Method):
    """Low-rank adapters on named linear layers plus fully trained modules.

    Args:
        rank, alpha, targets, scope, fully_trained, dropout: as in :class:`LoRAOptions`.

    Raises:
        ValueError: for a rank < 1 or no target.
    """

    name = "lora"
    prefix = "base_model.model."
    option_classes = (LoRAOptions,)

    def __init__(
        self,
        *,
        rank: int = 6,
        alpha: float | None = None,
        targets: tuple[str, ...] = DEFAULT_TARGETS,
        scope: str = DEFAULT_SCOPE,
        fully_trained: tuple[str, ...] = DEFAULT_FULLY_TRAINED,
        dropout: float = 0.0,
    ) -> None:
        if rank < 1:
            raise ValueError(f"LoRA rank must be >= 1, got {rank}")
        if not targets:
            raise ValueError("LoRA needs at least one target module (e.g. q,v)")
        self.rank = rank
        self.alpha = float(2 * rank if alpha is None else alpha)
        self.targets = tuple(targets)
        self.scope = scope
        self.fully_trained = tuple(fully_trained)
        self.dropout = dropout

    @classmethod
    def from_options(cls, options: Mapping[str, Any], *, run: RunShape) -> LoRA:
        """Rank, alpha, targets, scope, dropout and fully trained prefixes from the options."""
        return cls(**dataclasses.asdict(build_options(LoRAOptions, options)))

    def _pattern(self, targets: tuple[str, ...]) -> str:
        """peft's ``target_modules`` regex (matched with ``re.fullmatch`` on module names)."""
        alternatives = "|".join(re.escape(t) for t in targets)
        scope = rf"{re.escape(self.scope)}\..*\." if self.scope else r"(.*\.)?"
        return rf"{scope}({alternatives})"

    def in_family_names(self, model: nn.Module) -> None:
        """Targets, scope and fully trained prefixes in the model family's own module names.

        The options are written in VT5's names (the competition's model); each family says
        what they mean in its modules (:meth:`benchmark.model.families.ModelFamily.translate`).
        For VT5 nothing changes.
        """
        from benchmark.model.families import family_of

        family = family_of(model)
        self.targets = family.translate(self.targets)
        scope = family.translate((self.scope,)) if self.scope else ("",)
        self.scope = scope[0] if scope else ""
        self.fully_trained = family.translate(self.fully_trained)

    def check(self, model: nn.Module) -> None:
        """Raise a clear error when a target or fully-trained prefix matches nothing.

        Args:
            model: the base model.

        Raises:
            ValueError: naming what matched nothing.
        """
        module_names = [name for name, _ in model.named_modules()]
        for target in self.targets:
            pattern = re.compile(self._pattern((target,)))
            matched = [n for n in module_names if pattern.fullmatch(n)]
            if not matched:
                where = f" under {self.scope!r}" if self.scope else ""
                raise ValueError(
                    f"LoRA target {target!r} matches no module{where}; "
                    "T5 attention projections are q, k, v, o and feed-forward layers wi, wo"
                )
            not_linear = [n for n in matched if not isinstance(model.get_submodule(n), nn.Linear)]
            if not_linear:
                raise ValueError(f"LoRA target {target!r} matches non-linear modules {not_linear[:3]}")
        unmatched = [p for p, c in match_prefixes(model, self.fully_trained).items() if c == 0]
        if unmatched:
            raise ValueError(f"fully-trained prefix(es) {unmatched} match no parameter of the model")

    def prepare(self, model: nn.Module, *, seed: int) -> nn.Module:
        """Inject adapters (seeded) and unfreeze the fully trained modules."""
        from peft import LoraConfig, get_peft_model

        self.in_family_names(model)
        self.check(model)
        config = LoraConfig(
            r=self.rank,
            lora_alpha=self.alpha,
            lora_dropout=self.dropout,
            target_modules=self._pattern(self.targets),
            bias="none",
        )
        with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            torch.manual_seed(seed)
            peft_model = get_peft_model(model, config)
        for name, parameter in peft_model.named_parameters(remove_duplicate=False):
            stripped = name[len(self.prefix):] if name.startswith(self.prefix) else name
            if stripped.startswith(self.fully_trained):
                parameter.requires_grad_(True)
        return peft_model

    def inference_model(self, model: nn.Module) -> nn.Module:
        """The underlying model, adapters active."""
        return model.get_base_model()

    def export(self, model: nn.Module) -> nn.Module:
        """Merge the adapters into the frozen weights and drop the peft wrapper."""
        return model.merge_and_unload()

    def describe(self) -> dict[str, Any]:
        """Rank, alpha, targets, scope and fully trained prefixes."""
        return {
            "name": self.name,
            "rank": self.rank,
            "alpha": self.alpha,
            "targets": list(self.targets),
            "scope": self.scope,
            "fully_trained": list(self.fully_trained),
            "dropout": self.dropout,
        }
