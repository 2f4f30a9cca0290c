"""Checkpoint validation of uploads: the benchmark's safetensors checks, worded for participants.

The checks are ``benchmark.model.checkpoint_validation``'s (the one implementation, shared with the model
loaders): the file is read as bytes, nothing is ever unpickled, the header is checked for size,
structure and data offsets that tile the data region exactly, the tensors against the benchmark's
VT5 specification, and the values for NaN or infinity one tensor at a time. This module turns
their errors into :class:`InvalidSubmission` messages for the ``model`` part, without the
service's paths and with what the participant should do.
"""

from __future__ import annotations

from pathlib import Path

from benchmark.model.checkpoint_validation import (
    NonFiniteTensors,
    SpecMismatch,
    validate_safetensors_file,
)
from benchmark.model.safetensors_header import (
    MAX_LISTED,
    SafetensorsError,
    SafetensorsHeader,
    TensorSpec,
    read_safetensors_header,
    some,
)
from evaluator.validation.errors import InvalidSubmission

PART = "model"
HINT = "upload a file written by safetensors.torch.save_file (model.safetensors)"


def read_header(path: Path, *, max_header_bytes: int, max_tensors: int) -> SafetensorsHeader:
    """Parse and check the header of an uploaded safetensors file without reading its data.

    Args:
        path: the uploaded file.
        max_header_bytes: largest JSON header accepted.
        max_tensors: most tensors accepted.

    Returns:
        The parsed header.

    Raises:
        InvalidSubmission: the file is not a well-formed safetensors file.
    """
    try:
        return read_safetensors_header(
            path, max_header_bytes=max_header_bytes, max_tensors=max_tensors
        )
    except SafetensorsError as error:
        raise InvalidSubmission(PART, f"{error.detail}; {HINT}") from None


def validate_checkpoint(
    path: Path,
    expected: TensorSpec,
    *,
    max_header_bytes: int,
    max_tensors: int,
    finite: bool = True,
) -> SafetensorsHeader:
    """Run every checkpoint check: structure, spec, and (optionally) finite values.

    Args:
        path: the uploaded checkpoint.
        expected: the benchmark model's tensor spec.
        max_header_bytes: largest header accepted.
        max_tensors: most tensors accepted.
        finite: also read every value and reject NaN/inf.

    Returns:
        The parsed header.

    Raises:
        InvalidSubmission: on the first failed check.
    """
    try:
        return validate_safetensors_file(
            path,
            expected,
            max_header_bytes=max_header_bytes,
            max_tensors=max_tensors,
            check_values=finite,
        )
    except SpecMismatch as error:
        raise InvalidSubmission(PART, _mismatch_message(error)) from None
    except NonFiniteTensors as error:
        raise InvalidSubmission(PART, _non_finite_message(error)) from None
    except SafetensorsError as error:
        raise InvalidSubmission(PART, f"{error.detail}; {HINT}") from None


def _mismatch_message(error: SpecMismatch) -> str:
    """What differs from the benchmark's VT5 model, and what to upload instead."""
    problems: list[str] = []
    if error.missing:
        problems.append(f"{len(error.missing)} missing tensors ({some(error.missing)})")
    if error.unexpected:
        problems.append(f"{len(error.unexpected)} unexpected tensors ({some(error.unexpected)})")
    wrong = [
        f"{name}: {list(shape)} {dtype}, expected {list(want_shape)} {want_dtype}"
        for name, (shape, dtype), (want_shape, want_dtype) in error.wrong
    ]
    if wrong:
        problems.append(
            f"{len(wrong)} tensors with the wrong shape or dtype ({'; '.join(wrong[:MAX_LISTED])})"
        )
    return (
        "the checkpoint does not match the benchmark's VT5 configuration: "
        + "; ".join(problems)
        + ". Save the full state dict of the benchmark model (merge adapters first) with "
        "safetensors."
    )


def _non_finite_message(error: NonFiniteTensors) -> str:
    """Which tensors hold NaN or inf, and where to look."""
    return (
        f"{len(error.names)} tensors hold NaN or infinite values ({some(error.names)}); "
        "check the training run for divergence"
    )
