"""The header of a safetensors file, parsed and checked without reading a tensor or unpickling.

A safetensors file is an 8-byte little-endian header length, a JSON header
`{name: {dtype, shape, data_offsets}}` and the raw tensor bytes. :func:`read_safetensors_header`
checks the header and the offsets before any tensor is read, so a truncated file, a pickle renamed
`.safetensors` or an oversized header is refused with a message that names the file. The checks
of the tensors themselves (against a specification, their values) are in
:mod:`benchmark.model.checkpoint_validation`; reading the tensors is
:mod:`benchmark.model.tensor_file`'s.
"""

from __future__ import annotations

import codecs
import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.strict_json import JsonLimits, JsonRefused, Reason, parse_json_object

#: Largest accepted safetensors header (the real vt5-base header is about 100 KB).
MAX_HEADER_BYTES = 8 * 1024 * 1024
#: safetensors dtype name -> bytes per value.
DTYPE_BYTES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8,
}  # fmt: skip
FLOAT_DTYPES = frozenset({"F16", "BF16", "F32", "F64", "F8_E4M3", "F8_E5M2"})
#: Most tensors accepted in one file (a VT5-base checkpoint holds about 600).
MAX_TENSORS = 100_000
#: Most dimensions accepted in one tensor's shape.
MAX_DIMENSIONS = 8
MAX_LISTED = 5

TensorSpec = dict[str, tuple[tuple[int, ...], str]]


class CheckpointError(ValueError):
    """A checkpoint file or directory that cannot be used, with what is wrong and where."""


class SafetensorsError(CheckpointError):
    """A safetensors file that fails a check.

    Attributes:
        path: the file or directory at fault.
        detail: what is wrong, without the path (the scoring service shows it to participants,
            who must not see the service's paths).
    """

    def __init__(self, path: str | Path, detail: str) -> None:
        super().__init__(f"{path}: {detail}")
        self.path = Path(path)
        self.detail = detail



@dataclass(frozen=True)
class SafetensorsHeader:
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


def spec_data_bytes(spec: TensorSpec) -> int:
    """Bytes of the tensor data a file holding every tensor of a specification has."""
    return sum(math.prod(shape) * DTYPE_BYTES[dtype] for shape, dtype in spec.values())


def read_safetensors_header(
    path: str | Path,
    *,
    max_header_bytes: int = MAX_HEADER_BYTES,
    max_tensors: int = MAX_TENSORS,
) -> SafetensorsHeader:
    """Parse and check a safetensors header without reading any tensor.

    Checks the size of the header, its structure, each entry's dtype, shape and offsets, and that
    the offsets tile the data region exactly (no gap, overlap, truncation or padding).

    Args:
        path: the `.safetensors` file.
        max_header_bytes: refuse headers larger than this.
        max_tensors: refuse files with more tensors than this.

    Returns:
        The parsed header (``__metadata__`` apart).

    Raises:
        SafetensorsError: if the file is missing, not safetensors, truncated or inconsistent.
    """
    path = Path(path)
    if not path.is_file():
        raise SafetensorsError(path, "file not found")
    size = path.stat().st_size
    with path.open("rb") as handle:
        prefix = handle.read(8)
        if len(prefix) < 8:
            raise SafetensorsError(
                path, f"file of {size} bytes is too short to be a safetensors file"
            )
        (header_len,) = struct.unpack("<Q", prefix)
        if header_len > max_header_bytes:
            raise SafetensorsError(
                path,
                f"not a safetensors file: declared header of {header_len} bytes exceeds the "
                f"limit of {max_header_bytes} bytes; {_what_it_looks_like(prefix)}",
            )
        if 8 + header_len > size:
            raise SafetensorsError(
                path,
                f"truncated file: the header needs {8 + header_len} bytes but the file has {size}",
            )
        raw = handle.read(header_len)
    header = _parse_header(path, raw, max_header_bytes=max_header_bytes)
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in metadata.items()
    ):
        raise SafetensorsError(path, "__metadata__ must map strings to strings")
    if len(header) > max_tensors:
        raise SafetensorsError(path, f"{len(header)} tensors exceed the limit of {max_tensors}")
    tensors: TensorSpec = {}
    offsets: dict[str, tuple[int, int]] = {}
    for name, entry in header.items():
        tensors[name], offsets[name] = _tensor_entry(path, name, entry)
    _check_tiling(path, offsets, size - 8 - header_len)
    return SafetensorsHeader(tensors, offsets, 8 + header_len, metadata)


def _header_limits(max_header_bytes: int) -> JsonLimits:
    """The strict reader's limits for a header of at most ``max_header_bytes``.

    ``{name: {dtype, shape, data_offsets}}`` is three levels deep and an offset is a uint64 (20
    digits); a key takes at least four bytes, so the size limit already bounds the key count.
    """
    return JsonLimits(max_depth=3, max_number_chars=20, max_keys=max_header_bytes // 4 + 1)


def _parse_header(path: Path, raw: bytes, *, max_header_bytes: int) -> dict[str, Any]:
    """The header's JSON object, read with the kit's one strict reader (:mod:`benchmark.strict_json`)."""
    if raw.startswith(codecs.BOM_UTF8):  # safetensors itself refuses a byte-order mark
        raise SafetensorsError(path, "the safetensors header is not valid JSON (a byte-order mark)")
    try:
        return parse_json_object(raw, limits=_header_limits(max_header_bytes))
    except JsonRefused as refusal:
        if refusal.reason is Reason.NOT_UTF8:
            detail = "is not valid JSON (bad UTF-8)"
        elif refusal.malformed:
            detail = f"is not valid JSON ({refusal.subject or refusal})"
        elif refusal.reason is Reason.NOT_AN_OBJECT:
            detail = "must be a JSON object"
        else:
            detail = f"is refused: {refusal}"
        raise SafetensorsError(path, f"the safetensors header {detail}") from None


def _what_it_looks_like(prefix: bytes) -> str:
    """Name a pickle or zip archive (what `torch.save` writes) from its first bytes."""
    if prefix[:2] == b"PK" or prefix[:1] == b"\x80":
        return "this is a pickle/zip (torch.save) file, refused without being opened"
    return "pickle or torch.save archives are refused"


def _tensor_entry(
    path: Path, name: str, entry: object
) -> tuple[tuple[tuple[int, ...], str], tuple[int, int]]:
    """Check one header entry and return its (shape, dtype) and offsets."""
    if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
        raise SafetensorsError(
            path, f"tensor {name!r}: entry needs exactly dtype, shape, data_offsets"
        )
    dtype, shape, span = entry["dtype"], entry["shape"], entry["data_offsets"]
    if dtype not in DTYPE_BYTES:
        raise SafetensorsError(path, f"tensor {name!r}: unknown dtype {str(dtype)[:20]!r}")
    if (
        not isinstance(shape, list)
        or not all(type(d) is int and d >= 0 for d in shape)
        or len(shape) > MAX_DIMENSIONS
    ):
        raise SafetensorsError(
            path,
            f"tensor {name!r}: shape must be a list of at most {MAX_DIMENSIONS} non-negative "
            "integers",
        )
    if (
        not isinstance(span, list)
        or len(span) != 2
        or not all(type(o) is int and o >= 0 for o in span)
        or span[0] > span[1]
    ):
        raise SafetensorsError(
            path, f"tensor {name!r}: data_offsets must be [begin, end] with 0 <= begin <= end"
        )
    expected = math.prod(shape) * DTYPE_BYTES[dtype]
    if span[1] - span[0] != expected:
        raise SafetensorsError(
            path,
            f"tensor {name!r}: {span[1] - span[0]} bytes of data for shape {shape} in {dtype} "
            f"(needs {expected})",
        )
    return (tuple(shape), dtype), (span[0], span[1])


def _check_tiling(path: Path, offsets: dict[str, tuple[int, int]], data_size: int) -> None:
    """The tensors' byte ranges must cover the data region exactly, without overlap."""
    position = 0
    for begin, end in sorted(offsets.values()):
        if begin != position:
            raise SafetensorsError(
                path, "tensor data ranges overlap or leave gaps: the file is corrupt"
            )
        position = end
    if position != data_size:
        raise SafetensorsError(
            path,
            f"truncated or padded file: the header describes {position} bytes of tensor data "
            f"but the file holds {data_size}",
        )



def some(names: list[str], limit: int = MAX_LISTED) -> str:
    """The first few names of a list and how many more, for error messages."""
    shown = ", ".join(names[:limit])
    return shown + (f", and {len(names) - limit} more" if len(names) > limit else "")
