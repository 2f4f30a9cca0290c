"""Full fine-tuning: the organisers' track-1 baseline.

Every parameter is trained and communicated except the declared frozen prefixes (by default the
visual encoder ``visual_embedding.image_model.``, kept frozen in the competition's baselines).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from torch import nn

from baselines.methods.base import Method, RunShape, match_prefixes
from baselines.options import build_options, option

VISUAL_ENCODER = "visual_embedding.image_model."


@dataclass(frozen=True)
class FullFineTuningOptions:
    """Options of full fine-tuning."""

    frozen: tuple[str, ...] = option(
        (VISUAL_ENCODER,),
        help="full fine-tuning: parameter-name prefixes kept frozen and never sent.",
    )


class FullFineTuning(Method):
    """Train (and send) all parameters but the frozen ones.

    Args:
        frozen: parameter-name prefixes kept frozen and never sent.
    """

    name = "full"
    option_classes = (FullFineTuningOptions,)

    def __init__(self, frozen: tuple[str, ...] = (VISUAL_ENCODER,)) -> None:
        self.frozen = tuple(frozen)

    @classmethod
    def from_options(cls, options: Mapping[str, Any], *, run: RunShape) -> FullFineTuning:
        """Frozen prefixes from the ``frozen`` option."""
        return cls(frozen=build_options(FullFineTuningOptions, options).frozen)

    def prepare(self, model: nn.Module, *, seed: int) -> nn.Module:
        """Freeze the declared prefixes (in the model family's names) and unfreeze the rest."""
        from benchmark.model.families import family_of

        self.frozen = family_of(model).translate(self.frozen)
        unmatched = [p for p, count in match_prefixes(model, self.frozen).items() if count == 0]
        if unmatched:
            raise ValueError(
                f"frozen prefix(es) {unmatched} match no parameter of the model; "
                "check the names (e.g. visual_embedding.image_model.)"
            )
        for name, parameter in model.named_parameters(remove_duplicate=False):
            parameter.requires_grad_(not name.startswith(self.frozen))
        return model

    def describe(self) -> dict[str, Any]:
        """Name and frozen prefixes."""
        return {"name": self.name, "frozen": list(self.frozen)}
