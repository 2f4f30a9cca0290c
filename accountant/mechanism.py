"""The sampled Gaussian mechanism's parameters and their validation.

Every accountant in this package analyses the same mechanism: each step, every unit (a
provider, in track 2) is included independently with probability ``sample_rate`` (Poisson
sampling), the clipped contributions are summed and Gaussian noise of standard deviation
``noise_multiplier x clipping_norm`` is added (Mironov et al. 2019, "Renyi Differential
Privacy of the Sampled Gaussian Mechanism", https://arxiv.org/abs/1908.10530).
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction
from typing import NamedTuple


class SampledGaussian(NamedTuple):
    """``steps`` compositions of the Poisson-sampled Gaussian mechanism.

    Attributes:
        noise_multiplier: noise standard deviation divided by the L2 sensitivity.
        sample_rate: Poisson inclusion probability of one unit per step, in (0, 1].
        steps: how many times the mechanism ran (an exact integer).
    """

    noise_multiplier: float
    sample_rate: float
    steps: int


def check_noise_multiplier(value: float, *, name: str = "noise_multiplier") -> float:
    """Return ``value`` as a float if it is a finite number > 0.

    Raises:
        ValueError: naming ``name`` when the value is not a positive finite number.
    """
    number = _real(value, name)
    if not number > 0:
        raise ValueError(f"{name} must be > 0 (Gaussian noise is required); got {value!r}")
    return number


def check_sample_rate(value: float, *, name: str = "sample_rate") -> float:
    """Return ``value`` as a float if it lies in (0, 1].

    Raises:
        ValueError: naming ``name`` when the rate is outside (0, 1].
    """
    number = _real(value, name)
    if not 0 < number <= 1:
        raise ValueError(f"{name} must be in (0, 1] (a sampling probability); got {value!r}")
    return number


def check_delta(value: float, *, name: str = "delta") -> float:
    """Return ``value`` as a float if it lies in the open interval (0, 1).

    Raises:
        ValueError: naming ``name`` when delta is outside (0, 1).
    """
    number = _real(value, name)
    if not 0 < number < 1:
        raise ValueError(f"{name} must be in (0, 1), for example 1e-5; got {value!r}")
    return number


def check_epsilon(value: float, *, name: str = "epsilon") -> float:
    """Return ``value`` as a float if it is a finite number > 0.

    Raises:
        ValueError: naming ``name`` when epsilon is not a positive finite number.
    """
    number = _real(value, name)
    if not number > 0:
        raise ValueError(f"{name} must be > 0; got {value!r}")
    return number


def exact_steps(value: int, *, name: str = "steps") -> int:
    """Return ``value`` as an int if it is a whole number >= 1.

    Floats are accepted only when they hold an exact integer (``2250.0``). Beware that an
    integer-valued float can still be the wrong integer: ``90 // 0.04`` is ``2249.0`` because
    0.04 is stored as slightly more than 0.04. Compute steps with :func:`steps_for_epochs` or
    integer arithmetic.

    Raises:
        ValueError: naming ``name`` when the value is not a positive integer.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a positive integer; got {value!r}")
    if isinstance(value, numbers.Integral):
        steps = int(value)
    elif math.isfinite(float(value)) and float(value).is_integer():
        steps = int(value)
    else:
        raise ValueError(
            f"{name} must be an exact integer; got {value!r}. Compute it with integer "
            "arithmetic (for example accountant.steps_for_epochs), never int(epochs // rate) "
            "on floats: int(90 // 0.04) is 2249, not 2250"
        )
    if steps < 1:
        raise ValueError(f"{name} must be >= 1; got {value!r}")
    return steps


def steps_for_epochs(*, epochs: int, sample_rate: float) -> int:
    """Number of steps in ``epochs`` passes at ``sample_rate``, computed exactly.

    The rate is read as the decimal it was written as (``0.04`` is 1/25), so
    ``steps_for_epochs(epochs=90, sample_rate=0.04)`` is 2250, whereas the float expression
    ``int(90 // 0.04)`` gives 2249.

    Args:
        epochs: whole number of passes over the data.
        sample_rate: expected fraction of the data per step, in (0, 1].

    Returns:
        The exact number of steps.

    Raises:
        ValueError: when the arguments are invalid or ``epochs / sample_rate`` is not whole.
    """
    epochs = exact_steps(epochs, name="epochs")
    rate = Fraction(repr(check_sample_rate(sample_rate)))
    steps = epochs / rate
    if steps.denominator != 1:
        raise ValueError(
            f"{epochs} epochs at sample_rate {sample_rate} is {float(steps)} steps, not a whole "
            "number; choose a number of steps explicitly"
        )
    return int(steps)


def check_mechanism(*, noise_multiplier: float, sample_rate: float, steps: int) -> SampledGaussian:
    """Validate the three parameters and bundle them.

    Raises:
        ValueError: naming the first invalid parameter.
    """
    return SampledGaussian(
        check_noise_multiplier(noise_multiplier),
        check_sample_rate(sample_rate),
        exact_steps(steps),
    )


def _real(value: object, name: str) -> float:
    """Float of a finite real number (bools and strings rejected)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number; got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{name} must be finite; got {value!r}")
    return number
