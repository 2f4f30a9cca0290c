"""Stateful accountants, the registry, and the runnable docstring examples."""

from __future__ import annotations

import doctest
import importlib

import pytest

from accountant.registry import accountant_names, create_accountant, register_accountant


def test_registry_lists_rdp_first_and_refuses_unknown_names():
    assert accountant_names() == ("rdp", "prv", "pld")
    with pytest.raises(ValueError, match="unknown accountant 'gdp'; choose one of: rdp, prv, pld"):
        create_accountant("gdp")
    with pytest.raises(ValueError, match="already registered"):
        register_accountant("rdp", "accountant.prv:PRVAccountant")


@pytest.mark.parametrize("name", ["rdp", "prv", "pld"])
def test_steps_compose_like_one_block(name):
    stepwise = create_accountant(name)
    for _ in range(5):
        stepwise.step(noise_multiplier=1.145, sample_rate=0.025)
    block = create_accountant(name)
    block.step(noise_multiplier=1.145, sample_rate=0.025, steps=5)
    assert stepwise.history == block.history and len(stepwise) == 5
    assert stepwise.get_epsilon(delta=1e-5) == block.get_epsilon(delta=1e-5)
    assert create_accountant(name).get_epsilon(delta=1e-5) == 0.0


def test_heterogeneous_history_composes():
    accountant = create_accountant("rdp")
    accountant.step(noise_multiplier=1.145, sample_rate=0.025, steps=5)
    accountant.step(noise_multiplier=0.637, sample_rate=0.025, steps=5)
    assert len(accountant.history) == 2 and len(accountant) == 10
    alone = create_accountant("rdp")
    alone.step(noise_multiplier=0.637, sample_rate=0.025, steps=5)
    assert accountant.get_epsilon(delta=1e-5) > alone.get_epsilon(delta=1e-5)


def test_step_arguments_are_keyword_only_and_validated():
    accountant = create_accountant("rdp")
    with pytest.raises(TypeError):
        accountant.step(1.0, 0.1)  # type: ignore[misc]
    with pytest.raises(ValueError, match="sample_rate"):
        accountant.step(noise_multiplier=1.0, sample_rate=0)
    with pytest.raises(ValueError, match="delta"):
        accountant.get_epsilon(delta=0)


def test_package_import_is_light():
    import subprocess
    import sys

    code = "import accountant.cli, sys; print('opacus' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "False"], out.stderr


@pytest.mark.parametrize(
    "module",
    [
        "accountant",
        "accountant.analysis.rdp",
        "accountant.analysis.opacus_accounting",
        "accountant.rdp",
        "accountant.calibration",
        "accountant.federated",
        "accountant.declaration",
    ],
)
def test_docstring_examples(module):
    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0
