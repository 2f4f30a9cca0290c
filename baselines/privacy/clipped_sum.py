"""A running sum of clipped per-provider updates in buffers allocated once per client update.

The reference path (:func:`baselines.privacy.mechanism.sum_clipped`) keeps every provider's
delta, then clips each through float64 copies of every tensor and checks the clipped norm with
another pass: per provider, about five full copies of the communicated parameters. Here each
provider's delta is written into one reused float32 buffer straight from the model's live
parameters, its norm is taken in float64 without a float64 copy, and the scaled delta is added
in place to the sum. The clipping rule is :func:`~baselines.privacy.mechanism.clip_factor`,
shared with the reference path, so both sums agree to float32 rounding and every added
update has norm at most ``S``.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from baselines.privacy.mechanism import clip_factor


class ClippedSum:
    """Sum of per-provider updates ``current - start``, each clipped to L2 norm ``S``.

    Args:
        start: the round's starting values by name (the deltas are taken against them).
        clipping_norm: S > 0.

    Raises:
        ValueError: for a clipping norm that is not > 0.
    """

    def __init__(self, start: Mapping[str, torch.Tensor], clipping_norm: float) -> None:
        if not clipping_norm > 0:
            raise ValueError(f"clipping_norm must be > 0, got {clipping_norm!r}")
        self.start = {name: t.to(torch.float32) for name, t in start.items()}
        self.clipping_norm = clipping_norm
        self.total = {name: torch.zeros_like(t) for name, t in self.start.items()}
        self._delta = {name: torch.empty_like(t) for name, t in self.start.items()}
        self.norms: list[float] = []

    @torch.no_grad()
    def add(self, current: Mapping[str, torch.Tensor]) -> float:
        """Clip ``current - start`` to ``S`` and add it to the sum.

        Args:
            current: the provider's trained values by name (live parameters are fine: they are
                only read).

        Returns:
            The update's norm before clipping.
        """
        squares = 0.0
        for name, delta in self._delta.items():
            torch.sub(current[name].detach().to(torch.float32), self.start[name], out=delta)
            squares += float(torch.linalg.vector_norm(delta, dtype=torch.float64) ** 2)
        norm = squares ** 0.5
        factor = clip_factor(norm, self.clipping_norm)
        for name, delta in self._delta.items():
            self.total[name].add_(delta, alpha=factor)
        self.norms.append(norm)
        return norm
