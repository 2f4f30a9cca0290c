"""The stand-ins for ``scipy.stats`` and ``scipy.signal`` give scipy's values, bit for bit.

:mod:`accountant.analysis.light_stats` computes ``norm(scale=s).cdf``, ``.logcdf`` and ``.ppf``
and :mod:`accountant.analysis.light_signal` computes ``fftconvolve`` as scipy does, so that the
accountants' copies of dp-accounting and opacus need not import those packages; here each is
compared with the real function on the values the PLD gives them and on the edges (infinities,
NaN, zeros of both signs, 0-d inputs, the dtypes), and every call they leave to scipy is
checked to reach it.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import scipy.signal
import scipy.stats

from accountant.analysis import light_signal, light_stats

EDGES = [-np.inf, -1e300, -40.0, -8.3, -1.0, -1e-300, -0.0, 0.0, 5e-324, 1e-12, 0.5, 3.0, 38.5,
         1e308, np.inf, np.nan]  # fmt: skip
PROBABILITIES = [0.0, 5e-324, 1e-300, 1e-16, 1e-10, 0.025, 0.3, 0.5, 0.5 + 1e-16, 0.9, 0.999999,
                 1 - 1e-16, 1.0, -0.0, -0.1, 1.1, np.nan]  # fmt: skip
SCALES = [1e-3, 0.5, 0.637, 1.0, 1.7, 37.0, 2]

#: the edges overflow on purpose, in scipy as in the stand-ins.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _same(mine, theirs) -> None:
    """Equal type, dtype, shape, values (NaN included) and signs of zero."""
    assert type(mine) is type(theirs)
    mine, theirs = np.asarray(mine), np.asarray(theirs)
    assert mine.dtype == theirs.dtype and mine.shape == theirs.shape
    np.testing.assert_array_equal(mine, theirs)
    if np.issubdtype(mine.dtype, np.complexfloating):
        mine, theirs = np.stack([mine.real, mine.imag]), np.stack([theirs.real, theirs.imag])
    assert np.array_equal(np.signbit(mine), np.signbit(theirs))


def _samples(rng: np.random.Generator, scale: float) -> np.ndarray:
    return np.concatenate(
        [np.array(EDGES), rng.normal(0, 3 * scale, 2000), rng.uniform(-60, 60, 500)]
    )


@pytest.mark.parametrize("scale", SCALES)
def test_the_normal_cdf_and_logcdf_are_scipy_s(scale: float) -> None:
    rng = np.random.default_rng(7)
    mine, theirs = light_stats.norm(scale=scale), scipy.stats.norm(scale=scale)
    assert isinstance(mine, light_stats.FrozenNormal)
    x = _samples(rng, scale)
    for method in ("cdf", "logcdf"):
        _same(getattr(mine, method)(x), getattr(theirs, method)(x))
        _same(getattr(mine, method)(x.reshape(-1, 2)), getattr(theirs, method)(x.reshape(-1, 2)))
        _same(
            getattr(mine, method)(x.astype(np.float32)),
            getattr(theirs, method)(x.astype(np.float32)),
        )
        _same(getattr(mine, method)(list(x[:20])), getattr(theirs, method)(list(x[:20])))
        _same(getattr(mine, method)(np.arange(-5, 6)), getattr(theirs, method)(np.arange(-5, 6)))
        for value in [*EDGES, 2, np.float64(0.25), np.array(1.5), np.array([])]:
            _same(getattr(mine, method)(value), getattr(theirs, method)(value))


@pytest.mark.parametrize("scale", SCALES)
def test_the_normal_ppf_is_scipy_s(scale: float) -> None:
    rng = np.random.default_rng(11)
    mine, theirs = light_stats.norm(scale=scale), scipy.stats.norm(scale=scale)
    q = np.concatenate(
        [np.array(PROBABILITIES), rng.uniform(0, 1, 2000), 10.0 ** -rng.uniform(0, 300, 500)]
    )
    _same(mine.ppf(q), theirs.ppf(q))
    _same(mine.ppf(q.astype(np.float32)), theirs.ppf(q.astype(np.float32)))
    _same(mine.ppf(q.reshape(-1, 3)), theirs.ppf(q.reshape(-1, 3)))
    for value in [*PROBABILITIES, 0, 1, np.float64(0.75), np.array(0.1), np.array([])]:
        _same(mine.ppf(value), theirs.ppf(value))


def test_other_normals_methods_and_names_are_scipy_s() -> None:
    frozen = scipy.stats._distn_infrastructure.rv_continuous_frozen
    for args, kwds in [((), {}), ((1.0,), {}), ((), {"loc": 1.0, "scale": 2.0}),
                       ((), {"scale": 0.0}), ((), {"scale": -1.0}), ((), {"scale": np.inf}),
                       ((), {"scale": np.array([1.0, 2.0])}), ((), {"scale": True})]:  # fmt: skip
        assert isinstance(light_stats.norm(*args, **kwds), frozen), (args, kwds)
    mine, theirs = light_stats.norm(scale=2.0), scipy.stats.norm(scale=2.0)
    for method in ("sf", "logsf", "pdf", "isf"):
        _same(getattr(mine, method)(np.array(EDGES)), getattr(theirs, method)(np.array(EDGES)))
    assert mine.std() == theirs.std() == 2.0
    assert light_stats.binom is scipy.stats.binom and light_stats.laplace is scipy.stats.laplace
    with pytest.raises(AttributeError):
        light_stats.no_such_distribution  # noqa: B018


@pytest.mark.parametrize(
    ("n1", "n2"), [(1, 1), (1, 7), (9, 1), (2, 2), (2, 3), (100, 7), (1001, 4097), (6000, 5999)]
)
def test_fftconvolve_is_scipy_s(n1: int, n2: int) -> None:
    rng = np.random.default_rng(n1 * 10_000 + n2)
    a, b = rng.uniform(0, 1, n1), rng.exponential(1e-3, n2)
    _same(light_signal.fftconvolve(a, b), scipy.signal.fftconvolve(a, b))
    _same(light_signal.fftconvolve(b, a), scipy.signal.fftconvolve(b, a))
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    _same(light_signal.fftconvolve(a32, b32), scipy.signal.fftconvolve(a32, b32))
    _same(light_signal.fftconvolve(a32, b), scipy.signal.fftconvolve(a32, b))
    ints = rng.integers(-5, 5, n1)
    _same(light_signal.fftconvolve(ints, b), scipy.signal.fftconvolve(ints, b))
    _same(light_signal.fftconvolve(ints, ints), scipy.signal.fftconvolve(ints, ints))


def test_the_calls_fftconvolve_leaves_to_scipy_are_scipy_s() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.uniform(0, 1, 50), rng.uniform(0, 1, 20)
    for mode in ("same", "valid"):
        _same(light_signal.fftconvolve(a, b, mode=mode), scipy.signal.fftconvolve(a, b, mode=mode))
    a2, b2 = a.reshape(5, 10), b.reshape(2, 10)
    _same(light_signal.fftconvolve(a2, b2), scipy.signal.fftconvolve(a2, b2))
    _same(light_signal.fftconvolve(a, b, axes=0), scipy.signal.fftconvolve(a, b, axes=0))
    c = a + 1j * a[::-1]
    _same(light_signal.fftconvolve(c, b), scipy.signal.fftconvolve(c, b))
    _same(light_signal.fftconvolve(list(a), list(b)), scipy.signal.fftconvolve(list(a), list(b)))
    _same(light_signal.fftconvolve(a, np.array([])), scipy.signal.fftconvolve(a, np.array([])))
    _same(light_signal.convolve(a, b, mode="same"), scipy.signal.convolve(a, b, mode="same"))
    assert light_signal.windows is scipy.signal.windows


def test_importing_the_stand_ins_imports_neither_scipy_stats_nor_scipy_signal() -> None:
    code = (
        "import sys; from accountant.analysis import light_signal, light_stats; "
        "light_stats.norm(scale=1.0).cdf(0.5); "
        "light_signal.fftconvolve(light_stats.np.ones(4), light_stats.np.ones(3)); "
        "print(sorted(m for m in ('scipy.stats', 'scipy.signal') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.stdout.split() == ["[]"], out.stderr
