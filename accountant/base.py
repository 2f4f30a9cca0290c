"""The common interface of the stateful accountants (the opacus ``IAccountant`` shape)."""

from __future__ import annotations

import abc
from typing import ClassVar

from accountant.mechanism import SampledGaussian, check_delta, check_mechanism


class PrivacyAccountant(abc.ABC):
    """Tracks the sampled Gaussian steps taken so far and reports the epsilon they spend.

    Subclasses hold no maths: they call the stateless analysis module of the same name.

    Attributes:
        name: registry name of the accountant.
        history: ``SampledGaussian`` entries; consecutive identical steps are merged.
    """

    name: ClassVar[str]

    def __init__(self) -> None:
        self.history: list[SampledGaussian] = []

    def step(self, *, noise_multiplier: float, sample_rate: float, steps: int = 1) -> None:
        """Record ``steps`` more steps of the mechanism.

        Args:
            noise_multiplier: noise standard deviation over the L2 sensitivity (> 0).
            sample_rate: Poisson sampling rate in (0, 1].
            steps: exact number of steps to add (>= 1).

        Raises:
            ValueError: when a parameter is invalid.
        """
        entry = check_mechanism(
            noise_multiplier=noise_multiplier, sample_rate=sample_rate, steps=steps
        )
        if self.history and self.history[-1][:2] == entry[:2]:
            last = self.history.pop()
            entry = SampledGaussian(
                last.noise_multiplier, last.sample_rate, last.steps + entry.steps
            )
        self.history.append(entry)

    def get_epsilon(self, *, delta: float) -> float:
        """Epsilon spent so far at ``delta`` (0 before any step).

        Raises:
            ValueError: when delta is outside (0, 1).
        """
        delta = check_delta(delta)
        if not self.history:
            return 0.0
        return self._epsilon(delta)

    @abc.abstractmethod
    def _epsilon(self, delta: float) -> float:
        """Epsilon of the non-empty history at a validated delta."""

    def __len__(self) -> int:
        return sum(entry.steps for entry in self.history)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(history={self.history!r})"
