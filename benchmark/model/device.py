"""Where a model runs and at which precision: one place for `--device` and `--precision`.

`pflkit evaluate`, the scoring worker (`pflkit worker`) and `pflkit train` take the same two
options (training: `baselines.engine.placement`). The default
device is CUDA when torch sees a GPU, else the CPU; the default precision is fp32, which gives
the same answers on every device up to float rounding. bf16 is `torch.autocast` around the
forward passes (weights stay fp32): faster on GPUs with bf16 units, not bit-compatible.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

AUTO = "auto"
PRECISIONS = ("fp32", "bf16")


def check_device_name(requested: str) -> torch.device | None:
    """Refuse a `--device` value that names no device (availability is checked at run time).

    Returns:
        The named device, or None for "auto".

    Raises:
        ValueError: for a name other than auto, cpu, cuda or cuda:N.
    """
    if requested == AUTO:
        return None
    try:
        device = torch.device(requested)
    except (RuntimeError, TypeError):
        raise ValueError(
            f"--device {requested}: not a device name; use auto, cpu, cuda or cuda:N"
        ) from None
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"--device {requested}: only cpu and cuda devices are supported")
    return device


def check_precision(precision: str) -> None:
    """Refuse a `--precision` value other than `PRECISIONS`.

    Raises:
        ValueError: naming the value and the choices.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r}: use one of {', '.join(PRECISIONS)}")


def resolve_device(requested: str | None = None) -> torch.device:
    """The torch device a `--device` value names.

    Args:
        requested: "auto" or None (CUDA when available, else CPU), "cpu", "cuda" or "cuda:N".

    Returns:
        The device.

    Raises:
        ValueError: if the name is not a device, or CUDA is asked for but torch sees no GPU.
    """
    if requested in (None, AUTO):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = check_device_name(requested)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"--device {requested}: torch sees no CUDA GPU on this machine (a CPU build of "
                "torch, or no driver); use --device cpu"
            )
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(
                f"--device {requested}: this machine has {torch.cuda.device_count()} GPU(s)"
            )
    return device


@contextlib.contextmanager
def autocast(device: torch.device, precision: str) -> Iterator[None]:
    """Run the enclosed forward passes at `precision` ("fp32": unchanged, "bf16": autocast).

    `torch.autocast` is thread-local: enter it in the thread that runs the model.

    Raises:
        ValueError: for a precision other than `PRECISIONS`.
    """
    check_precision(precision)
    if precision == "fp32":
        yield
        return
    with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
        yield
