"""The PRV accountant (Gopi et al. 2021, opacus's implementation; maths in
``accountant.analysis.prv``). A cross-check: tighter than RDP, not authoritative."""

from __future__ import annotations

from accountant.analysis import prv as analysis
from accountant.base import PrivacyAccountant


class PRVAccountant(PrivacyAccountant):
    """Privacy loss random variable accountant; reports the upper bound on epsilon."""

    name = "prv"

    def __init__(self, eps_error: float = analysis.EPS_ERROR) -> None:
        super().__init__()
        self.eps_error = eps_error

    def _epsilon(self, delta: float) -> float:
        return analysis.compute_epsilon_of_history(
            history=self.history, delta=delta, eps_error=self.eps_error
        )
