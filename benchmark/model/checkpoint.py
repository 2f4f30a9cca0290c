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
from pathlib import Path

import torch

from benchmark.model.configuration_vt5 import VT5Config

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
#: Largest accepted safetensors header (the real vt5-base header is about 100 KB).
MAX_HEADER_BYTES = 8 * 1024 * 1024
#: Largest accepted config.json.
MAX_CONFIG_BYTES = 1024 * 1024

_DTYPE_NAMES = {
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.float64: "F64",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.bool: "BOOL",
}
_DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
                "U8": 1, "BOOL": 1}

TensorSpec = dict[str, tuple[tuple[int, ...], str]]


class CheckpointError(ValueError):
    """A checkpoint file or directory that cannot be used, with what is wrong and where."""


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
    from benchmark.model.modeling_vt5 import VT5ForConditionalGeneration

    with torch.device("meta"):
        model = VT5ForConditionalGeneration(config)
    return {
        name: (tuple(tensor.shape), _DTYPE_NAMES[tensor.dtype])
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


def spec_data_bytes(spec: TensorSpec) -> int:
    """Bytes of the tensor data a file holding every tensor of a specification has."""
    return sum(math.prod(shape) * _DTYPE_BYTES[dtype] for shape, dtype in spec.values())


def read_safetensors_header(path: Path, *, max_header_bytes: int = MAX_HEADER_BYTES) -> dict:
    """Parse and bound-check a safetensors header without reading any tensor.

    Args:
        path: the `.safetensors` file.
        max_header_bytes: refuse headers larger than this.

    Returns:
        The header: `{name: {"dtype", "shape", "data_offsets"}}` (metadata removed).

    Raises:
        CheckpointError: if the file is missing, not safetensors, truncated or inconsistent.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: file not found")
    size = path.stat().st_size
    with path.open("rb") as handle:
        prefix = handle.read(8)
        if len(prefix) < 8:
            raise CheckpointError(f"{path}: {size} bytes, too short to be a safetensors file")
        if prefix[:2] == b"PK" or prefix[:1] == b"\x80":
            raise CheckpointError(
                f"{path}: this is a pickle/zip (torch.save) file, not safetensors; it is refused "
                "without being opened. Save the model with `save_pretrained` (safetensors)."
            )
        (header_len,) = struct.unpack("<Q", prefix)
        if header_len > max_header_bytes:
            raise CheckpointError(
                f"{path}: safetensors header of {header_len} bytes exceeds the limit of "
                f"{max_header_bytes} bytes (not a safetensors file, or a malicious one)"
            )
        if 8 + header_len > size:
            raise CheckpointError(
                f"{path}: truncated, header needs {8 + header_len} bytes but the file has {size}"
            )
        raw = handle.read(header_len)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{path}: the safetensors header is not valid JSON ({error})") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: the safetensors header is not a JSON object")
    header.pop("__metadata__", None)
    data_size = size - 8 - header_len
    for name, entry in header.items():
        try:
            dtype, shape, (start, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(f"{path}: malformed header entry for tensor {name!r}") from None
        expected = math.prod(shape) * _DTYPE_BYTES.get(dtype, 0)
        if dtype not in _DTYPE_BYTES or end - start != expected or start < 0:
            raise CheckpointError(
                f"{path}: tensor {name!r} ({dtype}, shape {shape}) has inconsistent offsets "
                f"[{start}, {end})"
            )
        if end > data_size:
            raise CheckpointError(
                f"{path}: truncated, tensor {name!r} ends at byte {end} of the data section but "
                f"the file holds only {data_size} data bytes"
            )
    return header


def validate_safetensors_file(
    path: str | Path,
    spec: TensorSpec,
    *,
    max_header_bytes: int = MAX_HEADER_BYTES,
    check_values: bool = True,
    subset: bool = False,
) -> None:
    """Check a safetensors file against a tensor specification.

    Args:
        path: the `.safetensors` file.
        spec: `{name: (shape, dtype)}`, e.g. from `expected_tensor_spec`.
        max_header_bytes: refuse headers larger than this.
        check_values: also read every tensor and refuse NaN or infinite values.
        subset: the file may hold any subset of the specified tensors (a track-3
            personalisation); by default it must hold all of them.

    Raises:
        CheckpointError: naming the file and the first problems found (missing, unexpected,
            wrongly shaped or typed tensors, non-finite values).
    """
    from safetensors import safe_open

    path = Path(path)
    header = read_safetensors_header(path, max_header_bytes=max_header_bytes)
    problems = []
    missing = [] if subset else sorted(set(spec) - set(header))
    unexpected = sorted(set(header) - set(spec))
    if missing:
        problems.append(f"{len(missing)} missing tensor(s): {_some(missing)}")
    if unexpected:
        problems.append(f"{len(unexpected)} unexpected tensor(s): {_some(unexpected)}")
    for name in sorted(set(spec) & set(header)):
        shape, dtype = spec[name]
        got_shape, got_dtype = tuple(header[name]["shape"]), header[name]["dtype"]
        if got_shape != tuple(shape):
            problems.append(f"tensor {name!r} has shape {list(got_shape)}, expected {list(shape)}")
        if got_dtype != dtype:
            problems.append(f"tensor {name!r} has dtype {got_dtype}, expected {dtype}")
    if problems:
        raise CheckpointError(f"{path}: " + "; ".join(problems[:8]))
    if not check_values:
        return
    try:
        with safe_open(str(path), framework="pt") as handle:
            for name in handle.keys():
                tensor = handle.get_tensor(name)
                if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
                    raise CheckpointError(f"{path}: tensor {name!r} contains NaN or infinite values")
    except CheckpointError:
        raise
    except Exception as error:  # safetensors raises its own error types on corrupt files
        raise CheckpointError(f"{path}: cannot be read as safetensors ({error})") from None


def read_checkpoint_config(directory: str | Path) -> VT5Config:
    """Read and check the `config.json` of a VT5 checkpoint directory.

    Args:
        directory: the checkpoint directory.

    Returns:
        The configuration.

    Raises:
        CheckpointError: if the directory or its config is missing, unreadable or not VT5.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise CheckpointError(f"{directory}: checkpoint directory not found")
    config_path = directory / CONFIG_NAME
    if not config_path.is_file():
        raise CheckpointError(
            f"{config_path}: missing; a VT5 checkpoint directory holds {CONFIG_NAME}, "
            f"{WEIGHTS_NAME} and the tokenizer (spiece.model / tokenizer.json)"
        )
    if config_path.stat().st_size > MAX_CONFIG_BYTES:
        raise CheckpointError(f"{config_path}: larger than {MAX_CONFIG_BYTES} bytes")
    try:
        raw = json.loads(config_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{config_path}: not valid JSON ({error})") from None
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


def _some(names: list[str], limit: int = 5) -> str:
    """First few names of a list, for error messages."""
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names) - limit} more)" if len(names) > limit else "")
