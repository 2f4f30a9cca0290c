"""``scipy.stats`` for dp-accounting's PLD code, without importing ``scipy.stats``.

dp-accounting's Gaussian privacy losses (``pld/privacy_loss_mechanism.py``) hold a frozen
``scipy.stats.norm(scale=sigma)`` and call its ``cdf``, ``logcdf`` and ``ppf``. Importing
``scipy.stats`` takes about 0.3 s of CPU (it imports every distribution, ``scipy.interpolate``,
``scipy.optimize`` and ``scipy.spatial``), a third of ``pflkit dp epsilon``'s time on 2 cores,
for three one-line functions: scipy computes them as ``scipy.special.ndtr``, ``log_ndtr`` and
``ndtri`` of ``(x - loc) / scale`` (``stats/_continuous_distns.py``: ``_norm_cdf``,
``_norm_logcdf``, ``_norm_ppf``), with the support's ends and NaN set by masks
(``stats/_distn_infrastructure.py``, ``rv_continuous.cdf``, ``logcdf`` and ``ppf``), which this
module sets the same way (``log_ndtr(inf)`` is -0.0, scipy's value there 0.0).

:func:`norm` returns :class:`FrozenNormal` for ``norm(scale=s)`` with a finite ``s > 0`` (the
only call dp-accounting's PLD makes on the sampled Gaussian), computing exactly scipy's
expressions; any other call, any other method and any other name of this module is the real
``scipy.stats``'s, imported on first use. ``tests/accountant/test_light_scipy.py`` compares the
values with scipy's bit for bit, edges included.
"""

from __future__ import annotations

import importlib
import math
import types
from typing import Any

import numpy as np
from scipy import special


def _stats() -> types.ModuleType:
    """The real ``scipy.stats`` (imported on first use)."""
    return importlib.import_module("scipy.stats")


class FrozenNormal:
    """``scipy.stats.norm(scale=scale)`` (mean 0): ``cdf``, ``logcdf`` and ``ppf`` computed as
    scipy computes them; every other attribute is the real frozen distribution's.

    Args:
        scale: the standard deviation, finite and > 0.
    """

    def __init__(self, scale: float) -> None:
        self.scale = scale
        self._real: Any = None

    def _standardised(self, x: Any) -> np.ndarray:
        """``(x - loc) / scale`` in the dtype scipy's ``rv_continuous`` uses."""
        x = np.asarray(x)
        dtype = np.promote_types(x.dtype, np.float64)
        return np.asarray((x - np.asarray(0)) / np.asarray(self.scale), dtype=dtype)

    def cdf(self, x: Any) -> Any:
        """P(X <= x): ``special.ndtr`` of the standardised ``x`` (0 at -inf, 1 at inf)."""
        z = self._standardised(x)
        output = np.zeros(z.shape, z.dtype)
        return _fill(output, z, special.ndtr, at_infinity=1.0)

    def logcdf(self, x: Any) -> Any:
        """log P(X <= x): ``special.log_ndtr`` of the standardised ``x`` (-inf at -inf, 0 at
        inf)."""
        z = self._standardised(x)
        output = np.full(z.shape, -np.inf, z.dtype)
        return _fill(output, z, special.log_ndtr, at_infinity=0.0)

    def ppf(self, q: Any) -> Any:
        """The quantile at ``q``: ``special.ndtri(q) * scale + loc`` inside (0, 1), -inf at 0,
        inf at 1, NaN elsewhere."""
        q = np.asarray(q)
        output = np.full(q.shape, np.nan)
        output[q == 0] = -np.inf * self.scale + 0
        output[q == 1] = np.inf * self.scale + 0
        inside = (q > 0) & (q < 1)
        if np.any(inside):
            output[inside] = special.ndtri(q[inside]) * np.asarray(self.scale) + np.asarray(0)
        return _scalar_or_array(output)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_real":
            raise AttributeError(name)
        if self._real is None:
            self._real = _stats().norm(scale=self.scale)
        return getattr(self._real, name)


def _fill(output: np.ndarray, z: np.ndarray, function: Any, *, at_infinity: float) -> Any:
    """``output`` (holding the value at -inf) with NaN where ``z`` is NaN, ``at_infinity`` where
    it is inf and ``function(z)`` where it is finite: the masks of scipy's ``rv_continuous``."""
    output[np.isnan(z)] = np.nan
    output[z >= np.inf] = at_infinity
    finite = (z > -np.inf) & (z < np.inf)
    if np.any(finite):
        output[finite] = function(z[finite])
    return _scalar_or_array(output)


def _scalar_or_array(values: np.ndarray) -> Any:
    """A 0-d result as a numpy scalar, as scipy returns it."""
    values = np.asarray(values)
    return values[()] if values.ndim == 0 else values


def norm(*args: Any, **kwds: Any) -> Any:
    """``scipy.stats.norm(*args, **kwds)``: a :class:`FrozenNormal` for ``norm(scale=s)`` with a
    finite ``s > 0``, the real frozen distribution otherwise."""
    scale = kwds.get("scale")
    if (
        not args
        and set(kwds) == {"scale"}
        and isinstance(scale, (float, int, np.floating, np.integer))
        and not isinstance(scale, bool)
        and math.isfinite(scale)
        and scale > 0
    ):
        return FrozenNormal(scale)
    return _stats().norm(*args, **kwds)


def __getattr__(name: str) -> Any:
    """Any other name of ``scipy.stats`` (the binomial, Laplace, ...), from the real module."""
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_stats(), name)
