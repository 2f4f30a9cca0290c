"""The RDP order grid (beyond opacus's 63, no NaN) and exact integer steps."""

from __future__ import annotations

import math

import numpy as np
import pytest

from accountant.analysis import rdp
from accountant.mechanism import exact_steps, steps_for_epochs

DELTA = 1e-5


def test_grid_extends_opacus_default():
    from opacus.accountants import RDPAccountant

    assert list(rdp.OPACUS_DEFAULT_ORDERS) == list(RDPAccountant.DEFAULT_ALPHAS)
    assert set(rdp.OPACUS_DEFAULT_ORDERS) < set(rdp.ORDERS)
    assert max(rdp.ORDERS) == rdp.MAX_ORDER == 1024


def test_extension_tightens_small_epsilons():
    default, default_order = rdp.compute_epsilon(
        noise_multiplier=10,
        sample_rate=0.025,
        steps=5,
        delta=DELTA,
        orders=rdp.OPACUS_DEFAULT_ORDERS,
    )
    extended, order = rdp.compute_epsilon(
        noise_multiplier=10, sample_rate=0.025, steps=5, delta=DELTA
    )
    assert default_order == 63 and round(default, 3) == 0.104
    assert order > 63 and round(extended, 4) == 0.0176


@pytest.mark.parametrize(
    ("sigma", "q", "steps", "loss"),
    [(10.0, 0.025, 5, 0.01), (3.0, 0.025, 5, 0.015), (50.0, 0.1, 5, 0.01), (5.0, 0.001, 100, 0.09)],
)
def test_geometric_spacing_loses_little_against_a_dense_grid(sigma, q, steps, loss):
    ours, order = rdp.compute_epsilon(
        noise_multiplier=sigma, sample_rate=q, steps=steps, delta=DELTA
    )
    # Every integer order within a factor 1.25 of our optimum (the dense optimum must lie
    # strictly inside that window, or the comparison would not be against the true dense best).
    low, high = max(64, int(order / 1.25)), min(1024, int(order * 1.25))
    window = rdp.OPACUS_DEFAULT_ORDERS + tuple(float(a) for a in range(low, high + 1))
    dense, dense_order = rdp.compute_epsilon(
        noise_multiplier=sigma, sample_rate=q, steps=steps, delta=DELTA, orders=window
    )
    assert low < dense_order < high or dense_order in (64, 1024)
    assert dense <= ours <= dense * (1 + loss)


def test_large_orders_overflow_to_nan_and_are_filtered():
    values = rdp.compute_rdp(
        noise_multiplier=1.0, sample_rate=0.025, steps=5, orders=[1024.0, 1030.0, 2000.0]
    )
    assert math.isfinite(values[0]) and np.isnan(values[1:]).all()
    epsilon, order = rdp.get_privacy_spent(orders=[1024.0, 1030.0, 2000.0], rdp=values, delta=DELTA)
    assert math.isfinite(epsilon) and order == 1024.0


def test_no_finite_order_means_no_privacy():
    assert rdp.get_privacy_spent(orders=[2.0], rdp=[np.inf], delta=DELTA)[0] == math.inf


def test_exact_steps_rejects_non_integers():
    assert exact_steps(2250) == 2250
    assert exact_steps(2250.0) == 2250
    assert exact_steps(np.int64(7)) == 7
    for bad in (2249.5, 0, -3, True, "5", float("nan")):
        with pytest.raises(ValueError, match="steps"):
            exact_steps(bad)
    with pytest.raises(ValueError, match="2249"):
        exact_steps(90 / 0.04 - 1e-9)


def test_int_floor_division_pitfall():
    # The float expression loses a step; steps_for_epochs reads 0.04 as the decimal 1/25.
    assert int(90 // 0.04) == 2249
    assert steps_for_epochs(epochs=90, sample_rate=0.04) == 2250
    wrong, _ = rdp.compute_epsilon(
        noise_multiplier=1.5, sample_rate=0.04, steps=int(90 // 0.04), delta=DELTA
    )
    right, _ = rdp.compute_epsilon(
        noise_multiplier=1.5,
        sample_rate=0.04,
        steps=steps_for_epochs(epochs=90, sample_rate=0.04),
        delta=DELTA,
    )
    assert wrong < right == pytest.approx(7.32911117143, abs=1e-7)
    with pytest.raises(ValueError, match="not a whole number"):
        steps_for_epochs(epochs=1, sample_rate=0.3)
