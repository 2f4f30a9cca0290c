"""The RDP accountant: the authoritative one for verification (Mironov et al. 2019 +
Balle et al. 2020; maths in ``accountant.analysis.rdp``)."""

from __future__ import annotations

from accountant.analysis import rdp as analysis
from accountant.base import PrivacyAccountant
from accountant.mechanism import check_delta


class RDPAccountant(PrivacyAccountant):
    """Renyi DP accountant of the sampled Gaussian mechanism over ``analysis.ORDERS``.

    Examples:
        >>> accountant = RDPAccountant()
        >>> accountant.step(noise_multiplier=1.145, sample_rate=0.025, steps=5)
        >>> round(accountant.get_epsilon(delta=1e-5), 4)
        1.0057
    """

    name = "rdp"

    def __init__(self, orders: tuple[float, ...] = analysis.ORDERS) -> None:
        super().__init__()
        self.orders = orders

    def get_privacy_spent(self, *, delta: float) -> tuple[float, float]:
        """Epsilon at ``delta`` and the Renyi order that attains it.

        Raises:
            ValueError: when delta is outside (0, 1).
        """
        delta = check_delta(delta)
        if not self.history:
            return 0.0, float("nan")
        rdp = analysis.compute_rdp_of_history(history=self.history, orders=self.orders)
        return analysis.get_privacy_spent(orders=self.orders, rdp=rdp, delta=delta)

    def _epsilon(self, delta: float) -> float:
        return self.get_privacy_spent(delta=delta)[0]
