"""``scipy.signal`` for the accountants' copies of opacus and dp-accounting, without importing
``scipy.signal``.

``scipy.signal`` imports ``scipy.stats`` (through its peak finding), ``scipy.interpolate`` and
the array-API wrappers of some 300 functions: about 0.4 s of CPU on 2 cores, for one function
each library calls. dp-accounting's PLD composes two distributions with
``scipy.signal.fftconvolve``; opacus's PRV imports ``scipy.signal.convolve`` for histories of
different mechanisms only.

:func:`fftconvolve` computes scipy's ``fftconvolve`` (``signal/_signaltools.py``) for two 1-D
real arrays in ``"full"`` mode, as scipy does it: ``scipy.fft.rfftn`` of both at the next fast
length, their product, ``irfftn``, the first ``len(a) + len(b) - 1`` values (the product of the
two when one has a single value, as dp-accounting's identity distribution has); every other call
goes to the real function. :func:`convolve` and every other name are the real
``scipy.signal``'s, imported on first use. ``tests/accountant/test_light_scipy.py`` compares the
values with scipy's bit for bit.
"""

from __future__ import annotations

import importlib
import types
from typing import Any

import numpy as np
from scipy import fft as sp_fft


def _signal() -> types.ModuleType:
    """The real ``scipy.signal`` (imported on first use)."""
    return importlib.import_module("scipy.signal")


def fftconvolve(in1: Any, in2: Any, mode: str = "full", axes: Any = None) -> Any:
    """``scipy.signal.fftconvolve(in1, in2, mode, axes)``.

    Two non-empty 1-D real (or integer) numpy arrays in ``"full"`` mode are convolved here, as
    scipy's ``fftconvolve`` and ``_freq_domain_conv`` do it (a product when one has a single
    value); any other call is the real function's.
    """
    if (
        mode == "full"
        and axes is None
        and type(in1) is np.ndarray
        and type(in2) is np.ndarray
        and in1.ndim == in2.ndim == 1
        and in1.shape[0] > 0
        and in2.shape[0] > 0
        and _is_real(in1)
        and _is_real(in2)
    ):
        if in1.shape[0] == 1 or in2.shape[0] == 1:
            return (in1 * in2).copy()  # scipy: an axis of length 1 is multiplied, not transformed
        length = in1.shape[0] + in2.shape[0] - 1
        fshape = [sp_fft.next_fast_len(length, True)]
        in1 = in1.astype(np.float64) if np.issubdtype(in1.dtype, np.integer) else in1
        in2 = in2.astype(np.float64) if np.issubdtype(in2.dtype, np.integer) else in2
        sp1 = sp_fft.rfftn(in1, fshape, axes=[0])
        sp2 = sp_fft.rfftn(in2, fshape, axes=[0])
        return sp_fft.irfftn(sp1 * sp2, fshape, axes=[0])[:length].copy()
    return _signal().fftconvolve(in1, in2, mode=mode, axes=axes)


def _is_real(values: np.ndarray) -> bool:
    """Whether scipy would convolve ``values`` with real FFTs (a real float or integer dtype)."""
    return np.issubdtype(values.dtype, np.floating) or np.issubdtype(values.dtype, np.integer)


def convolve(*args: Any, **kwds: Any) -> Any:
    """``scipy.signal.convolve``, the real one (imported on its first call)."""
    return _signal().convolve(*args, **kwds)


def __getattr__(name: str) -> Any:
    """Any other name of ``scipy.signal``, from the real module."""
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_signal(), name)
