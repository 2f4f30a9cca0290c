"""opacus's accountants loaded without torch give opacus's values, to the last bit.

:mod:`accountant.analysis.opacus_accounting` runs opacus's own files of ``opacus/accountants/``
as a private package with a stand-in base class; here they are compared with the real
``opacus.accountants`` (which imports torch) on the same inputs.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from accountant.analysis.opacus_accounting import PACKAGE, load

#: (noise multiplier, sample rate, steps): the track-2 range, a large-epsilon and a
#: small-epsilon case, and opacus's own PRV reference.
CASES = [(1.0, 0.1, 10), (0.637, 0.025, 5), (1.5, 0.04, 2249), (10.0, 0.025, 5), (0.3, 0.02, 30)]


@pytest.mark.parametrize(("sigma", "q", "steps"), CASES)
def test_rdp_is_opacus_rdp(sigma: float, q: float, steps: int) -> None:
    from opacus.accountants.analysis import rdp as opacus_rdp

    orders = [1 + x / 10.0 for x in range(1, 100)] + [float(a) for a in range(12, 1025, 37)]
    mine = load("analysis.rdp").compute_rdp(q=q, noise_multiplier=sigma, steps=steps, orders=orders)
    theirs = opacus_rdp.compute_rdp(q=q, noise_multiplier=sigma, steps=steps, orders=orders)
    np.testing.assert_array_equal(mine, theirs)
    assert load("analysis.rdp").get_privacy_spent(
        orders=orders, rdp=mine, delta=1e-5
    ) == opacus_rdp.get_privacy_spent(orders=orders, rdp=theirs, delta=1e-5)


@pytest.mark.filterwarnings("ignore:Optimal order is the largest alpha")
@pytest.mark.parametrize(("sigma", "q", "steps"), CASES)
def test_prv_is_opacus_prv(sigma: float, q: float, steps: int) -> None:
    from opacus.accountants import PRVAccountant, RDPAccountant

    for name, real in (("prv", PRVAccountant), ("rdp", RDPAccountant)):
        mine, theirs = load(name).__dict__[real.__name__](), real()
        mine.history = theirs.history = [(sigma, q, steps)]
        assert mine.get_epsilon(delta=1e-5) == theirs.get_epsilon(delta=1e-5), name


def test_a_history_of_two_mechanisms_is_opacus_prv() -> None:
    from opacus.accountants import PRVAccountant

    mine, theirs = load("prv").PRVAccountant(), PRVAccountant()
    for accountant in (mine, theirs):
        accountant.step(noise_multiplier=1.0, sample_rate=0.05)
        accountant.step(noise_multiplier=1.0, sample_rate=0.05)
        accountant.step(noise_multiplier=2.0, sample_rate=0.1)
    assert mine.history == theirs.history == [(1.0, 0.05, 2), (2.0, 0.1, 1)]
    assert mine.get_epsilon(delta=1e-6) == theirs.get_epsilon(delta=1e-6)


def test_the_private_copy_is_not_opacus() -> None:
    from opacus.accountants import PRVAccountant

    assert load("prv").PRVAccountant is not PRVAccountant
    assert load("prv").__name__ == f"{PACKAGE}.prv"
    assert load("accountant").IAccountant.__module__ == "accountant.analysis.opacus_accounting"


def test_loading_imports_neither_opacus_nor_torch() -> None:
    code = (
        "import sys; from accountant.analysis.opacus_accounting import load; "
        "load('prv'); load('rdp'); load('analysis.rdp'); "
        "print(sorted(m for m in ('opacus', 'torch') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.stdout.split() == ["[]"], out.stderr


def test_an_epsilon_computes_each_rdp_term_once() -> None:
    from accountant.cross_check import estimate_epsilons

    compute_rdp = load("analysis.rdp")._compute_rdp
    compute_rdp.cache_clear()
    estimate_epsilons(noise_multiplier=1.0, sample_rate=0.1, steps=10, delta=1e-5)
    # opacus's PRV sizes its domain with the RDP of opacus's orders, twice: every fractional
    # order's series was computed by the RDP accountant already.
    info = compute_rdp.cache_info()
    assert info.hits >= 2 * 99, info
