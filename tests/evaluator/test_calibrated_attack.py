"""The ``calibrated`` attack's residual: the gain beyond what the base likelihood predicts."""

from __future__ import annotations

import numpy as np
import pytest

from accountant.audit import roc_auc
from evaluator.canary_audit import calibrated_gain


def test_the_residual_removes_the_generic_gain() -> None:
    # the generic gain grows where the base model is worst (slope -0.5, as measured on mini)
    # and varies far more than memorisation adds: the plain gain hardly tells members apart
    rng = np.random.default_rng(0)
    base = rng.uniform(-20.0, -1.0, 400)
    members = rng.random(400) < 0.5
    gain = -0.5 * base - 0.6 + rng.normal(0.0, 0.3, 400) + 1.0 * members
    residual = calibrated_gain(gain, base, np.ones(400, dtype=bool))
    assert roc_auc(gain, members) < 0.7
    assert roc_auc(residual, members) > 0.95
    # the residual has mean 0 over the fitted probes (least squares with an intercept)
    assert residual.mean() == pytest.approx(0.0, abs=1e-9)


def test_probes_outside_the_fit_follow_the_same_line() -> None:
    base = np.array([-10.0, -8.0, -6.0, -4.0, -2.0, -5.0])
    gain = 3.0 - 0.5 * base  # an exact line
    fitted = np.array([True] * 5 + [False])
    gain[-1] += 2.0  # off the line and outside the fit
    residual = calibrated_gain(gain, base, fitted)
    assert residual[:5] == pytest.approx(np.zeros(5), abs=1e-9)
    assert residual[-1] == pytest.approx(2.0)


def test_a_flat_base_leaves_the_gain_centred() -> None:
    gain = np.array([1.0, 2.0, 6.0])
    assert calibrated_gain(gain, np.full(3, -4.0), np.ones(3, dtype=bool)) == pytest.approx(
        [-2.0, -1.0, 3.0]
    )
    assert calibrated_gain(gain, np.full(3, -4.0), np.zeros(3, dtype=bool)) == pytest.approx(gain)
