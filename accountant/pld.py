"""The PLD accountant (dp-accounting's; maths in ``accountant.analysis.pld``).
A cross-check: tighter than RDP, not authoritative."""

from __future__ import annotations

from accountant.analysis import pld as analysis
from accountant.base import PrivacyAccountant


class PLDAccountant(PrivacyAccountant):
    """Privacy loss distribution accountant with pessimistic discretisation."""

    name = "pld"

    def __init__(
        self, value_discretization_interval: float = analysis.VALUE_DISCRETIZATION
    ) -> None:
        super().__init__()
        self.value_discretization_interval = value_discretization_interval

    def _epsilon(self, delta: float) -> float:
        return analysis.compute_epsilon_of_history(
            history=self.history,
            delta=delta,
            value_discretization_interval=self.value_discretization_interval,
        )
