"""dp-accounting's PLD code, loaded without ``scipy.stats`` and ``scipy.signal``.

``import dp_accounting`` (or any of its modules) runs ``dp_accounting/__init__.py``, which
imports every part of the library: the RDP accountant, the mechanism calibration
(``scipy.optimize``) and the Gaussian mechanism's helpers (``scipy.stats``); its PLD modules
import ``scipy.stats`` and ``scipy.signal`` themselves. On 2 cores those two packages are about
0.4 s of CPU, more than the PLD's arithmetic and a third of ``pflkit dp epsilon``'s time, for
four functions: ``norm(scale=s).cdf``, ``.logcdf`` and ``.ppf`` and ``fftconvolve``.

:func:`load` executes dp-accounting's own files (the installed ones, found without importing
dp-accounting) as a private package, ``accountant.analysis._dp_accounting``
(:class:`~accountant.analysis.library_copy.LibraryCopy`), without the library's
``__init__.py``, and answers their ``from scipy import stats`` and ``from scipy import signal``
with :mod:`accountant.analysis.light_stats` and :mod:`accountant.analysis.light_signal`, which
compute those four functions as scipy does and take anything else from the real packages on
first use. The code that computes is dp-accounting's, so the values are identical
(``tests/accountant/test_dp_accounting_pld.py`` compares them with ``dp_accounting``'s own,
bit for bit). The real ``dp_accounting`` package is left alone.
"""

from __future__ import annotations

import types

from accountant.analysis import light_signal, light_stats
from accountant.analysis.library_copy import LibraryCopy

#: the private package that stands for ``dp_accounting``.
PACKAGE = "accountant.analysis._dp_accounting"

_COPY = LibraryCopy(
    PACKAGE,
    "dp_accounting",
    stand_ins={"scipy.stats": light_stats, "scipy.signal": light_signal},
)


def load(module: str) -> types.ModuleType:
    """dp-accounting's ``dp_accounting.<module>``, run from its file without ``scipy.stats``.

    >>> load("dp_event").GaussianDpEvent(1.0).noise_multiplier
    1.0

    Args:
        module: ``dp_event`` or ``pld.pld_privacy_accountant`` (the modules the kit uses).

    Returns:
        The module.

    Raises:
        ModuleNotFoundError: when dp-accounting is not installed.
    """
    return _COPY.load(module)
