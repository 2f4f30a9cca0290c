"""Safetensors checkpoint validation, done before any model is built.

The file is read as bytes: an 8-byte little-endian header length, a JSON header, then the raw
tensor data. Nothing is ever unpickled: a pickle or ``torch.save`` archive renamed to
``.safetensors`` fails the header check. The header is checked for size, structure, data offsets
that tile the data region exactly, and names, shapes and dtypes against the benchmark's VT5
configuration; the values are then checked to be finite, one tensor at a time.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path

from evaluator.validation.errors import InvalidSubmission

PART = "model"
DTYPE_BYTES = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "I64": 8,
    "U64": 8,
    "F64": 8,
}
FLOAT_DTYPES = {"F16", "BF16", "F32", "F64", "F8_E4M3", "F8_E5M2"}
MAX_LISTED = 5

TensorSpec = dict[str, tuple[tuple[int, ...], str]]


@dataclass(frozen=True)
class CheckpointHeader:
    """The parsed header of a safetensors file.

    Attributes:
        tensors: name -> (shape, dtype).
        offsets: name -> (begin, end) byte offsets in the data region.
        data_start: byte position where the data region begins.
        metadata: the optional ``__metadata__`` string map.
    """

    tensors: TensorSpec
    offsets: dict[str, tuple[int, int]]
    data_start: int
    metadata: dict[str, str]

    @property
    def parameters(self) -> int:
        """Number of values in all tensors."""
        return sum(math.prod(shape) for shape, _ in self.tensors.values())


def read_header(path: Path, *, max_header_bytes: int, max_tensors: int) -> CheckpointHeader:
    """Parse and check the header of a safetensors file without reading its data.

    Args:
        path: the uploaded file.
        max_header_bytes: largest JSON header accepted.
        max_tensors: most tensors accepted.

    Returns:
        The parsed header.

    Raises:
        InvalidSubmission: the file is not a well-formed safetensors file.
    """
    size = path.stat().st_size
    hint = "upload a file written by safetensors.torch.save_file (model.safetensors)"
    if size < 8:
        raise InvalidSubmission(PART, f"file of {size} bytes is too short for safetensors; {hint}")
    with path.open("rb") as handle:
        (header_len,) = struct.unpack("<Q", handle.read(8))
        if header_len > max_header_bytes:
            raise InvalidSubmission(
                PART,
                f"not a safetensors file: declared header of {header_len} bytes exceeds the "
                f"limit of {max_header_bytes} (pickle or torch.save archives are refused); {hint}",
            )
        if 8 + header_len > size:
            raise InvalidSubmission(
                PART,
                f"truncated file: the header needs {8 + header_len} "
                f"bytes but the file has {size}; {hint}",
            )
        raw = handle.read(header_len)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidSubmission(
            PART,
            f"the safetensors header is not valid JSON ({exc.msg if hasattr(exc, 'msg') else 'bad UTF-8'}); {hint}",
        ) from None
    if not isinstance(header, dict):
        raise InvalidSubmission(PART, f"the safetensors header must be a JSON object; {hint}")
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise InvalidSubmission(PART, "__metadata__ must map strings to strings")
    if len(header) > max_tensors:
        raise InvalidSubmission(PART, f"{len(header)} tensors exceed the limit of {max_tensors}")
    tensors: TensorSpec = {}
    offsets: dict[str, tuple[int, int]] = {}
    for name, info in header.items():
        tensors[name], offsets[name] = _tensor_entry(name, info)
    data_size = size - 8 - header_len
    _check_tiling(offsets, data_size)
    return CheckpointHeader(tensors, offsets, 8 + header_len, metadata)


def _tensor_entry(name: str, info: object) -> tuple[tuple[tuple[int, ...], str], tuple[int, int]]:
    """Check one header entry and return its (shape, dtype) and offsets."""
    if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
        raise InvalidSubmission(
            PART, f"tensor {name!r}: entry needs exactly dtype, shape, data_offsets"
        )
    dtype, shape, span = info["dtype"], info["shape"], info["data_offsets"]
    if dtype not in DTYPE_BYTES:
        raise InvalidSubmission(PART, f"tensor {name!r}: unknown dtype {str(dtype)[:20]!r}")
    if (
        not isinstance(shape, list)
        or not all(type(d) is int and d >= 0 for d in shape)
        or len(shape) > 8
    ):
        raise InvalidSubmission(
            PART, f"tensor {name!r}: shape must be a list of at most 8 non-negative integers"
        )
    if (
        not isinstance(span, list)
        or len(span) != 2
        or not all(type(o) is int and o >= 0 for o in span)
        or span[0] > span[1]
    ):
        raise InvalidSubmission(
            PART, f"tensor {name!r}: data_offsets must be [begin, end] with 0 <= begin <= end"
        )
    expected = math.prod(shape) * DTYPE_BYTES[dtype]
    if span[1] - span[0] != expected:
        raise InvalidSubmission(
            PART,
            f"tensor {name!r}: {span[1] - span[0]} bytes of data for shape "
            f"{shape} in {dtype} (needs {expected})",
        )
    return (tuple(shape), dtype), (span[0], span[1])


def _check_tiling(offsets: dict[str, tuple[int, int]], data_size: int) -> None:
    """The tensors' byte ranges must cover the data region exactly, without overlap."""
    position = 0
    for begin, end in sorted(offsets.values()):
        if begin != position:
            raise InvalidSubmission(
                PART, "tensor data ranges overlap or leave gaps: the file is corrupt"
            )
        position = end
    if position != data_size:
        raise InvalidSubmission(
            PART,
            f"truncated or padded file: the header describes {position} bytes "
            f"of tensor data but the file holds {data_size}",
        )


def check_against_spec(header: CheckpointHeader, expected: TensorSpec) -> None:
    """Require exactly the expected tensor names, shapes and dtypes.

    Args:
        header: the submission's parsed header.
        expected: name -> (shape, dtype) of the benchmark's VT5 model.

    Raises:
        InvalidSubmission: listing (the first few) missing, unexpected or mismatched tensors.
    """
    missing = sorted(set(expected) - set(header.tensors))
    unexpected = sorted(set(header.tensors) - set(expected))
    problems: list[str] = []
    if missing:
        problems.append(f"{len(missing)} missing tensors ({_some(missing)})")
    if unexpected:
        problems.append(f"{len(unexpected)} unexpected tensors ({_some(unexpected)})")
    wrong = [
        f"{name}: {list(header.tensors[name][0])} {header.tensors[name][1]}, expected "
        f"{list(expected[name][0])} {expected[name][1]}"
        for name in sorted(set(expected) & set(header.tensors))
        if tuple(header.tensors[name][0]) != tuple(expected[name][0])
        or header.tensors[name][1] != expected[name][1]
    ]
    if wrong:
        problems.append(
            f"{len(wrong)} tensors with the wrong shape or dtype ({'; '.join(wrong[:MAX_LISTED])})"
        )
    if problems:
        raise InvalidSubmission(
            PART,
            "the checkpoint does not match the benchmark's VT5 configuration: "
            + "; ".join(problems)
            + ". Save the full state dict of the benchmark model "
            "(merge adapters first) with safetensors.",
        )


def _some(names: list[str]) -> str:
    """The first few names, and how many more."""
    shown = ", ".join(names[:MAX_LISTED])
    return shown + (f", and {len(names) - MAX_LISTED} more" if len(names) > MAX_LISTED else "")


def check_finite(path: Path, header: CheckpointHeader) -> None:
    """Reject NaN or infinite values, reading one tensor at a time (safetensors, no pickle).

    Args:
        path: the checkpoint.
        header: its parsed header.

    Raises:
        InvalidSubmission: naming the first tensors that hold NaN or inf.
    """
    import torch
    from safetensors import safe_open

    bad: list[str] = []
    with safe_open(str(path), framework="pt", device="cpu") as handle:
        for name, (_, dtype) in header.tensors.items():
            if dtype not in FLOAT_DTYPES:
                continue
            tensor = handle.get_tensor(name)
            if not bool(torch.isfinite(tensor).all()):
                bad.append(name)
    if bad:
        raise InvalidSubmission(
            PART,
            f"{len(bad)} tensors hold NaN or infinite values ({_some(bad)}); "
            "check the training run for divergence",
        )


def validate_checkpoint(
    path: Path,
    expected: TensorSpec,
    *,
    max_header_bytes: int,
    max_tensors: int,
    finite: bool = True,
) -> CheckpointHeader:
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
    header = read_header(path, max_header_bytes=max_header_bytes, max_tensors=max_tensors)
    check_against_spec(header, expected)
    if finite:
        check_finite(path, header)
    return header
