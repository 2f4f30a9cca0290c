"""opacus's accounting code, loaded without opacus's torch.

Importing any module of opacus runs ``opacus/__init__.py``, which imports torch, the per-sample
gradient hooks and the ``PrivacyEngine``: about 2.5 s on 2 cores, most of what ``pflkit dp
epsilon`` took. opacus's accounting itself is numpy and scipy: ``accountants/analysis/rdp.py``
and ``accountants/analysis/prv/`` import no torch, and the accountant classes ``rdp.py`` and
``prv.py`` reach it only through their base class's module ``accountants/accountant.py``
(``from opacus.optimizers import DPOptimizer``, for an optimiser hook the kit does not use).

:func:`load` executes opacus's own files of ``opacus/accountants/`` (the installed ones, found
without importing opacus) as a private package, ``accountant.analysis._opacus``
(:class:`~accountant.analysis.library_copy.LibraryCopy`), whose ``accountant`` module is
:class:`IAccountant` below (the history list opacus's base keeps, no optimiser hook), and whose
``from scipy.signal import convolve`` (the PRV's composition of different mechanisms) is
answered by :mod:`accountant.analysis.light_signal`: the real function, imported on its first
call, so that an epsilon of one mechanism does not import ``scipy.signal``. The code that
computes is opacus's, so the values are identical (``tests/accountant/test_opacus_accounting.py``
compares them with ``opacus.accountants``). The real ``opacus`` package is left alone: a process
that trains imports it as usual.

One change of speed, not of value: the copy's ``analysis.rdp._compute_rdp`` (the RDP of one
sampled Gaussian step at one order, a pure function of its three numbers) is memoised. An
epsilon computes it for the same sample rate, noise and order three times: the RDP accountant
over its orders, then opacus's PRV accountant twice over opacus's orders to size its domain
(``compute_safe_domain_size``), and the fractional orders' series are most of the PRV's time.
"""

from __future__ import annotations

import abc
import functools
import threading
import types

from accountant.analysis import light_signal
from accountant.analysis.library_copy import LibraryCopy

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


def _base_module() -> types.ModuleType:
    """The stand-in for ``opacus/accountants/accountant.py``."""
    base = types.ModuleType(f"{PACKAGE}.accountant", IAccountant.__doc__)
    base.IAccountant = IAccountant  # type: ignore[attr-defined]
    return base


#: opacus's ``accountants`` folder as the private package, its ``scipy.signal.convolve`` (for
#: histories of different mechanisms) imported on its first call.
_COPY = LibraryCopy(
    PACKAGE,
    "opacus.accountants",
    replaced={"accountant": _base_module()},
    stand_ins={"scipy.signal": light_signal},
)


def _package() -> str:
    """The private package's name, created on first use (with the memoised RDP term).

    Raises:
        ModuleNotFoundError: when opacus is not installed.
    """
    with _LOCK:
        rdp = _COPY.load("analysis.rdp")
        if not hasattr(rdp._compute_rdp, "cache_info"):
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
    _package()
    return _COPY.load(module)
