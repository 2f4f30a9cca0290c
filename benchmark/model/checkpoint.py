"""Checkpoint validation: what a VT5 checkpoint directory must hold, checked without unpickling.

Used by the model loaders and by the scoring service on submitted checkpoints. A safetensors file
is an 8-byte little-endian header length, a JSON header `{name: {dtype, shape, data_offsets}}`
and the raw tensor bytes; the header and the offsets are checked before `safetensors` reads any
tensor, so a truncated file, a pickle renamed `.safetensors` or an oversized header is refused
with a message that names the file.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from benchmark.model.configuration_vt5 import VT5Config

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
#: Largest accepted safetensors header (the real vt5-base header is about 100 KB).
MAX_HEADER_BYTES = 8 * 1024 * 1024
#: Largest accepted config.json.
MAX_CONFIG_BYTES = 1024 * 1024

#: safetensors dtype name -> bytes per value.
DTYPE_BYTES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8,
}
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


class SpecMismatch(SafetensorsError):
    """A well-formed safetensors file whose tensors are not the expected ones.

    Attributes:
        missing: expected names the file lacks.
        unexpected: names the file holds that are not expected.
        wrong: ``(name, found, expected)`` for tensors of the wrong shape or dtype, found and
            expected being ``(shape, dtype)``.
    """

    def __init__(
        self,
        path: str | Path,
        missing: list[str],
        unexpected: list[str],
        wrong: list[tuple[str, tuple[tuple[int, ...], str], tuple[tuple[int, ...], str]]],
    ) -> None:
        self.missing, self.unexpected, self.wrong = missing, unexpected, wrong
        problems = []
        if missing:
            problems.append(f"{len(missing)} missing tensor(s): {some(missing)}")
        if unexpected:
            problems.append(f"{len(unexpected)} unexpected tensor(s): {some(unexpected)}")
        for name, (shape, dtype), (want_shape, want_dtype) in wrong:
            if tuple(shape) != tuple(want_shape):
                problems.append(
                    f"tensor {name!r} has shape {list(shape)}, expected {list(want_shape)}"
                )
            if dtype != want_dtype:
                problems.append(f"tensor {name!r} has dtype {dtype}, expected {want_dtype}")
        super().__init__(path, "; ".join(problems[:8]))


class NonFiniteTensors(SafetensorsError):
    """Tensors holding NaN or infinite values.

    Attributes:
        names: the tensors at fault, in file order.
    """

    def __init__(self, path: str | Path, names: list[str]) -> None:
        self.names = names
        super().__init__(
            path, f"tensor(s) {some(names)} hold NaN or infinite values"
        )


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


def expected_tensor_spec(config: VT5Config) -> TensorSpec:
    """Names, shapes and dtypes of the tensors `save_pretrained` writes for a configuration.

    The model is built on the meta device (no memory, no initialisation), tied aliases of the
    T5 embedding are dropped and the names are those written to disk (transformers keeps the
    original BEiT layout `image_model.encoder.layer.N.*` in files).

    Args:
        config: the VT5 configuration.

    Returns:
        `{name: (shape, safetensors dtype name)}` for every tensor the file must hold.
    """
    import torch

    from benchmark.model.modeling_vt5 import VT5ForConditionalGeneration

    with torch.device("meta"):
        model = VT5ForConditionalGeneration(config)
    dtype_names = {
        torch.float32: "F32",
        torch.float16: "F16",
        torch.bfloat16: "BF16",
        torch.float64: "F64",
        torch.int64: "I64",
        torch.int32: "I32",
        torch.bool: "BOOL",
    }
    return {
        name: (tuple(tensor.shape), dtype_names[tensor.dtype])
        for name, tensor in disk_state_dict(model).items()
    }


def disk_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The model's tensors under the names ``save_pretrained`` writes to ``model.safetensors``.

    Tied aliases are dropped and the names are the file's (the original BEiT layout of the visual
    encoder); the tensors share storage with the model's parameters and buffers, so writing
    into one (``copy_`` under ``torch.no_grad``) changes the model.

    Args:
        model: a VT5 model.

    Returns:
        File name -> the live tensor.
    """
    from transformers.core_model_loading import revert_weight_conversion
    from transformers.modeling_utils import remove_tied_weights_from_state_dict

    state_dict = remove_tied_weights_from_state_dict(model.state_dict(), model)
    return revert_weight_conversion(model, state_dict)


def file_names(model: torch.nn.Module) -> dict[str, str]:
    """Where each of the model's parameters and buffers is stored in ``model.safetensors``.

    A module's names and the file's can differ: tied aliases share one entry (the T5 token
    embedding's four names) and the visual encoder is stored in the original BEiT layout. The
    names are matched through the memory the tensors share with :func:`disk_state_dict`.

    Args:
        model: a VT5 model.

    Returns:
        Module name (aliases included) -> file name, for every tensor the file holds.
    """
    def key(tensor: torch.Tensor) -> tuple[int, int, tuple[int, ...]]:
        return tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape)

    stored = {key(tensor): name for name, tensor in disk_state_dict(model).items()}
    tensors = [*model.named_parameters(remove_duplicate=False),
               *model.named_buffers(remove_duplicate=False)]  # fmt: skip
    return {name: stored[key(t)] for name, t in tensors if key(t) in stored}


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
    try:
        header = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise SafetensorsError(path, "the safetensors header is not valid JSON (bad UTF-8)") from None
    except json.JSONDecodeError as error:
        raise SafetensorsError(
            path, f"the safetensors header is not valid JSON ({error.msg})"
        ) from None
    if not isinstance(header, dict):
        raise SafetensorsError(path, "the safetensors header must be a JSON object")
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


def check_against_spec(
    path: str | Path, header: SafetensorsHeader, spec: TensorSpec, *, subset: bool = False
) -> None:
    """Require exactly the expected tensor names, shapes and dtypes.

    Args:
        path: the file the header was read from (named in the error).
        header: its parsed header.
        spec: `{name: (shape, dtype)}`, e.g. from `expected_tensor_spec`.
        subset: the file may hold any subset of the specified tensors (a track-3
            personalisation); by default it must hold all of them.

    Raises:
        SpecMismatch: listing the missing, unexpected and mismatched tensors.
    """
    missing = [] if subset else sorted(set(spec) - set(header.tensors))
    unexpected = sorted(set(header.tensors) - set(spec))
    wrong = [
        (name, header.tensors[name], (tuple(spec[name][0]), spec[name][1]))
        for name in sorted(set(spec) & set(header.tensors))
        if tuple(header.tensors[name][0]) != tuple(spec[name][0])
        or header.tensors[name][1] != spec[name][1]
    ]
    if missing or unexpected or wrong:
        raise SpecMismatch(path, missing, unexpected, wrong)


def check_finite(path: str | Path, header: SafetensorsHeader) -> None:
    """Refuse NaN or infinite values, reading one floating-point tensor at a time (no pickle).

    Args:
        path: the file.
        header: its parsed header.

    Raises:
        NonFiniteTensors: naming the tensors that hold NaN or inf.
        SafetensorsError: the data cannot be read as safetensors.
    """
    import torch
    from safetensors import safe_open

    bad: list[str] = []
    try:
        with safe_open(str(path), framework="pt", device="cpu") as handle:
            for name, (_, dtype) in header.tensors.items():
                if dtype in FLOAT_DTYPES and not bool(torch.isfinite(handle.get_tensor(name)).all()):
                    bad.append(name)
    except Exception as error:  # safetensors raises its own error types on corrupt files
        raise SafetensorsError(path, f"cannot be read as safetensors ({error})") from None
    if bad:
        raise NonFiniteTensors(path, bad)


def validate_safetensors_file(
    path: str | Path,
    spec: TensorSpec,
    *,
    max_header_bytes: int = MAX_HEADER_BYTES,
    max_tensors: int = MAX_TENSORS,
    check_values: bool = True,
    subset: bool = False,
) -> SafetensorsHeader:
    """Check a safetensors file: its header, its tensors against a spec, its values.

    Args:
        path: the `.safetensors` file.
        spec: `{name: (shape, dtype)}`, e.g. from `expected_tensor_spec`.
        max_header_bytes: refuse headers larger than this.
        max_tensors: refuse files with more tensors than this.
        check_values: also read every tensor and refuse NaN or infinite values.
        subset: the file may hold any subset of the specified tensors (a track-3
            personalisation); by default it must hold all of them.

    Returns:
        The parsed header.

    Raises:
        SafetensorsError: naming the file and the first problems found (:class:`SpecMismatch`
            for missing, unexpected, wrongly shaped or typed tensors; :class:`NonFiniteTensors`
            for NaN or infinite values).
    """
    header = read_safetensors_header(path, max_header_bytes=max_header_bytes,
                                     max_tensors=max_tensors)
    check_against_spec(path, header, spec, subset=subset)
    if check_values:
        check_finite(path, header)
    return header


def read_bounded_json(path: Path, *, max_bytes: int) -> Any:
    """Parse a small JSON file that exists, refusing one over ``max_bytes``.

    Args:
        path: the file.
        max_bytes: the largest size accepted.

    Returns:
        The parsed value.

    Raises:
        CheckpointError: naming the file, when it is too large or not valid JSON.
    """
    if path.stat().st_size > max_bytes:
        raise CheckpointError(f"{path}: larger than {max_bytes} bytes")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{path}: not valid JSON ({error})") from None


def read_checkpoint_config(directory: str | Path) -> VT5Config:
    """Read and check the `config.json` of a VT5 checkpoint directory.

    Args:
        directory: the checkpoint directory.

    Returns:
        The configuration.

    Raises:
        CheckpointError: if the directory or its config is missing, unreadable or not VT5.
    """
    from benchmark.model.configuration_vt5 import VT5Config

    directory = Path(directory)
    if not directory.is_dir():
        raise CheckpointError(f"{directory}: checkpoint directory not found")
    config_path = directory / CONFIG_NAME
    if not config_path.is_file():
        raise CheckpointError(
            f"{config_path}: missing; a VT5 checkpoint directory holds {CONFIG_NAME}, "
            f"{WEIGHTS_NAME} and the tokenizer (spiece.model / tokenizer.json)"
        )
    raw = read_bounded_json(config_path, max_bytes=MAX_CONFIG_BYTES)
    if not isinstance(raw, dict) or raw.get("model_type") != VT5Config.model_type:
        found = raw.get("model_type") if isinstance(raw, dict) else type(raw).__name__
        raise CheckpointError(
            f"{config_path}: model_type is {found!r}, expected 'vt5'; this is not a VT5 checkpoint"
        )
    try:
        return VT5Config.from_dict(raw)
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"{config_path}: invalid VT5 configuration ({error})") from None


def validate_checkpoint_dir(directory: str | Path, *, check_values: bool = True) -> VT5Config:
    """Check a VT5 checkpoint directory: its config and its weights against that config.

    Args:
        directory: holds `config.json` and `model.safetensors`.
        check_values: also refuse NaN or infinite weights (reads every tensor).

    Returns:
        The checkpoint's configuration.

    Raises:
        CheckpointError: naming the file and the mismatch.
    """
    directory = Path(directory)
    config = read_checkpoint_config(directory)
    weights = directory / WEIGHTS_NAME
    if not weights.is_file():
        raise CheckpointError(f"{weights}: missing; save the model with `save_pretrained`")
    validate_safetensors_file(weights, expected_tensor_spec(config), check_values=check_values)
    return config


def some(names: list[str], limit: int = MAX_LISTED) -> str:
    """The first few names of a list and how many more, for error messages."""
    shown = ", ".join(names[:limit])
    return shown + (f", and {len(names) - limit} more" if len(names) > limit else "")
