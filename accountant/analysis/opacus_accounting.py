"""opacus's accounting code, loaded without opacus's torch.

Importing any module of opacus runs ``opacus/__init__.py``, which imports torch, the per-sample
gradient hooks and the ``PrivacyEngine``: about 2.5 s on 2 cores, most of what ``pflkit dp
epsilon`` took. opacus's accounting itself is numpy and scipy: ``accountants/analysis/rdp.py``
and ``accountants/analysis/prv/`` import no torch, and the accountant classes ``rdp.py`` and
``prv.py`` reach it only through their base class's module ``accountants/accountant.py``
(``from opacus.optimizers import DPOptimizer``, for an optimiser hook the kit does not use).

:func:`load` executes opacus's own files of ``opacus/accountants/`` (the installed ones, found
without importing opacus) as a private package, ``accountant.analysis._opacus``, whose
``accountant`` module is :class:`IAccountant` below (the history list opacus's base keeps, no
optimiser hook). The code that computes is opacus's, so the values are identical
(``tests/accountant/test_opacus_accounting.py`` compares them with ``opacus.accountants``). The
real ``opacus`` package is left alone: a process that trains imports it as usual.

One change of speed, not of value: the copy's ``analysis.rdp._compute_rdp`` (the RDP of one
sampled Gaussian step at one order, a pure function of its three numbers) is memoised. An
epsilon computes it for the same sample rate, noise and order three times: the RDP accountant
over its orders, then opacus's PRV accountant twice over opacus's orders to size its domain
(``compute_safe_domain_size``), and the fractional orders' series are most of the PRV's time.
"""

from __future__ import annotations

import abc
import functools
import importlib
import importlib.machinery
import importlib.util
import sys
import threading
import types
from pathlib import Path

#: the private package that stands for ``opacus.accountants``.
PACKAGE = "accountant.analysis._opacus"
#: RDP values of one (sample rate, noise multiplier, order) kept (about 270 per epsilon).
RDP_CACHE_SIZE = 4096

_LOCK = threading.Lock()


class IAccountant(abc.ABC):  # noqa: B024 (opacus's base has abstract methods; its subclasses define them)
    """Stand-in for ``opacus.accountants.accountant.IAccountant``: the ``(noise_multiplier,
    sample_rate, steps)`` history opacus's accountants keep, without the optimiser hook (the
    one part of that module that imports torch)."""

    def __init__(self) -> None:
        self.history: list[tuple[float, float, int]] = []


def _package() -> str:
    """The private package's name, created on first use.

    Raises:
        ModuleNotFoundError: when opacus is not installed.
    """
    with _LOCK:
        if PACKAGE not in sys.modules:
            spec = importlib.util.find_spec("opacus")  # finds, does not import, a top-level package
            if spec is None or not spec.submodule_search_locations:
                raise ModuleNotFoundError("opacus is not installed", name="opacus")
            root = Path(next(iter(spec.submodule_search_locations))) / "accountants"
            package_spec = importlib.machinery.ModuleSpec(PACKAGE, None, is_package=True)
            package_spec.submodule_search_locations = [str(root)]
            package = importlib.util.module_from_spec(package_spec)
            base = types.ModuleType(f"{PACKAGE}.accountant", IAccountant.__doc__)
            base.IAccountant = IAccountant  # type: ignore[attr-defined]
            sys.modules[base.__name__] = base
            sys.modules[PACKAGE] = package
            rdp = importlib.import_module(f"{PACKAGE}.analysis.rdp")
            rdp._compute_rdp = functools.lru_cache(maxsize=RDP_CACHE_SIZE, typed=True)(
                rdp._compute_rdp
            )
    return PACKAGE


def load(module: str) -> types.ModuleType:
    """opacus's ``opacus.accountants.<module>``, run from its file without importing torch.

    >>> load("analysis.rdp").compute_rdp(q=1.0, noise_multiplier=1.0, steps=1, orders=[2.0])
    array([1.])

    Args:
        module: ``analysis.rdp``, ``analysis.prv``, ``rdp`` or ``prv`` (the modules the kit
            uses; ``accountant`` is the stand-in base).

    Returns:
        The module.
    """
    return importlib.import_module(f"{_package()}.{module}")
