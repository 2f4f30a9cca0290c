"""dp-accounting's PLD loaded without ``scipy.stats`` and ``scipy.signal`` gives dp-accounting's
values, to the last bit.

:mod:`accountant.analysis.dp_accounting_pld` runs dp-accounting's own files as a private
package whose ``scipy.stats`` and ``scipy.signal`` are the kit's stand-ins; here its epsilons and
deltas are compared with the real ``dp_accounting`` package's on the same inputs.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from accountant.analysis import pld
from accountant.analysis.dp_accounting_pld import PACKAGE, load
from accountant.mechanism import SampledGaussian

#: (noise multiplier, sample rate, steps): the track-2 range, a large-epsilon and a
#: small-epsilon case, full batches, and the competition's configuration at epsilon 4.
CASES = [(1.0, 0.1, 10), (0.637, 0.025, 5), (1.5, 0.04, 2249), (10.0, 0.025, 5), (0.3, 0.02, 30),
         (2.0, 1.0, 3), (0.637, 0.0125, 5)]  # fmt: skip


def _real_accountant(history, interval: float):
    """The real dp-accounting PLD accountant with ``history`` composed, as the kit composes it."""
    from dp_accounting import dp_event
    from dp_accounting.pld import pld_privacy_accountant

    accountant = pld_privacy_accountant.PLDAccountant(value_discretization_interval=interval)
    for sigma, q, steps in history:
        event = dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma))
        accountant.compose(event, steps)
    return accountant


@pytest.mark.parametrize(
    ("sigma", "q", "steps", "interval"),
    [(*case, pld.VALUE_DISCRETIZATION) for case in CASES]
    + [(1.5, 0.04, 2249, 1e-4), (10.0, 0.025, 5, 1e-4)],  # dp-accounting's default grid too
)
def test_the_epsilon_and_delta_are_dp_accounting_s(
    sigma: float, q: float, steps: int, interval: float
) -> None:
    history = [SampledGaussian(sigma, q, steps)]
    real = _real_accountant(history, interval)
    for delta in (1e-5, 1e-8):
        mine = pld.compute_epsilon_of_history(
            history=history, delta=delta, value_discretization_interval=interval
        )
        assert mine == float(real.get_epsilon(delta))
    for epsilon in (0.5, 4.0):
        mine = pld.compute_delta_of_history(
            history=history, epsilon=epsilon, value_discretization_interval=interval
        )
        assert mine == float(real.get_delta(epsilon))


def test_a_history_of_different_mechanisms_is_dp_accounting_s() -> None:
    # Composing two different distributions goes through fftconvolve of two long arrays.
    history = [
        SampledGaussian(1.0, 0.05, 20), SampledGaussian(2.0, 0.1, 7), SampledGaussian(0.8, 0.01, 100)
    ]  # fmt: skip
    real = _real_accountant(history, pld.VALUE_DISCRETIZATION)
    assert pld.compute_epsilon_of_history(history=history, delta=1e-6) == float(
        real.get_epsilon(1e-6)
    )


def test_the_private_copy_is_not_dp_accounting() -> None:
    import dp_accounting.pld

    copy = load("pld.pld_privacy_accountant")
    assert copy.__name__ == f"{PACKAGE}.pld.pld_privacy_accountant"
    assert copy.PLDAccountant is not dp_accounting.pld.PLDAccountant
    assert load("dp_event").GaussianDpEvent is not dp_accounting.GaussianDpEvent
    mechanism = load("pld.privacy_loss_mechanism")
    assert mechanism.stats.__name__ == "accountant.analysis.light_stats"
    # The real package's modules still see the real scipy.
    assert dp_accounting.pld.privacy_loss_mechanism.stats.__name__ == "scipy.stats"


def test_loading_imports_neither_dp_accounting_nor_scipy_stats_nor_signal() -> None:
    code = (
        "import sys; from accountant.analysis import pld; "
        "print(pld.compute_epsilon(noise_multiplier=1.0, sample_rate=0.1, steps=10, delta=1e-5)); "
        "print(sorted(m for m in ('dp_accounting', 'scipy.stats', 'scipy.signal', 'scipy.optimize') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    value, modules = out.stdout.strip().splitlines()
    assert float(value) == pytest.approx(2.8545, abs=1e-4)
    assert modules == "[]"


def test_docstring_examples() -> None:
    import doctest

    from accountant.analysis import dp_accounting_pld

    result = doctest.testmod(dp_accounting_pld)
    assert result.attempted > 0 and result.failed == 0
