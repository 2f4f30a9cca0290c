"""A hub-layout checkpoint directory read, and the kit's checkpoint written from it: the steps
every family's converter shares (VT5's, :mod:`benchmark.model.conversion`, and the other
families', ``benchmark/model/families/*/conversion.py``).

A hub directory holds ``config.json``, ``model.safetensors`` or (the organisers' own, trusted)
``pytorch_model.bin`` and the tokenizer files. Its JSON files are read within limits; its weights
are read as plain tensors (``torch.load(weights_only=True)`` for the pickle, never reachable from
an upload) and cast to fp32; the kit's checkpoint is written to a staging directory, checked
against the family's own model and moved into place, complete or not at all.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from benchmark.model.checkpoint import (
    CONFIG_NAME,
    WEIGHTS_NAME,
    read_checkpoint_json,
    tensor_spec,
)
from benchmark.model.checkpoint_validation import validate_safetensors_file
from benchmark.model.safetensors_header import CheckpointError

PICKLE_WEIGHTS_NAME = "pytorch_model.bin"
#: T5Tokenizer's default number of `<extra_id_N>` sentinels.
T5_EXTRA_IDS = 100
_TOKENIZER_FILES = ("spiece.model", "tokenizer_config.json", "special_tokens_map.json")
_MAX_JSON_BYTES = 1024 * 1024


def read_hub_json(path: Path) -> dict[str, Any]:
    """A JSON object from a small file, with errors that name it."""
    if not path.is_file():
        raise CheckpointError(f"{path}: missing")
    return read_checkpoint_json(path, max_bytes=_MAX_JSON_BYTES)


def read_hub_config(source: Path, target: Path, model_type: str) -> tuple[Path, dict[str, Any]]:
    """The ``config.json`` of a hub-layout directory of ``model_type`` (another family's
    converter), once ``target`` is known to be new.

    Raises:
        FileExistsError: if ``target`` exists.
        CheckpointError: for a missing config or one of another ``model_type``.
    """
    if target.exists():
        raise FileExistsError(f"{target}: already exists; choose a new directory")
    config_path = source / CONFIG_NAME
    raw = read_hub_json(config_path)
    if raw.get("model_type") != model_type:
        raise CheckpointError(
            f"{config_path}: model_type is {str(raw.get('model_type'))[:40]!r}, not {model_type!r}"
        )
    return config_path, raw


def record_fp32(raw: dict[str, Any]) -> None:
    """Record float32 as the dtype of a config and its sub-configs (the kit's weights are fp32,
    whatever the hub's)."""
    for section in (raw, raw.get("text_config"), raw.get("vision_config")):
        if isinstance(section, dict):
            for key in ("dtype", "torch_dtype"):
                if key in section:
                    section[key] = "float32"


def read_fp32_weights(source: Path) -> tuple[dict[str, torch.Tensor], list[str]]:
    """A hub directory's weights, every floating tensor in fp32, and the report's line on them
    (the file, the tensors, how many were cast)."""
    state_dict, weights_file = read_public_weights(source)
    cast = [name for name, tensor in state_dict.items()
            if tensor.is_floating_point() and tensor.dtype.itemsize != 4]  # fmt: skip
    state_dict = {name: tensor.float().contiguous() if tensor.is_floating_point()
                  else tensor.contiguous() for name, tensor in state_dict.items()}  # fmt: skip
    line = f"weights: {weights_file}, {len(state_dict)} tensors" + (
        f", {len(cast)} cast to float32" if cast else "")
    return state_dict, [line]


def read_public_weights(source: Path) -> tuple[dict[str, torch.Tensor], str]:
    """The state dict of `model.safetensors` or (trusted) `pytorch_model.bin`."""
    if (source / WEIGHTS_NAME).is_file():
        from safetensors.torch import load_file

        try:
            return dict(load_file(str(source / WEIGHTS_NAME))), WEIGHTS_NAME
        except Exception as error:  # safetensors raises its own error types
            raise CheckpointError(f"{source / WEIGHTS_NAME}: unreadable ({error})") from None
    path = source / PICKLE_WEIGHTS_NAME
    if not path.is_file():
        raise CheckpointError(
            f"{source}: no {WEIGHTS_NAME} or {PICKLE_WEIGHTS_NAME}; point at the directory of the "
            "public checkpoint (config.json, pytorch_model.bin, spiece.model)"
        )
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # weights_only refuses anything but tensors and plain containers
        raise CheckpointError(
            f"{path}: cannot be read as a plain state dict with torch.load(weights_only=True) "
            f"({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})"
        ) from None
    if not isinstance(loaded, Mapping):
        raise CheckpointError(
            f"{path}: holds a {type(loaded).__name__}, not a state dict (a mapping from "
            "parameter names to tensors)"
        )
    for name, value in loaded.items():
        if not isinstance(name, str) or not isinstance(value, torch.Tensor):
            raise CheckpointError(
                f"{path}: entry {name!r} is a {type(value).__name__}, not a tensor; a checkpoint "
                "file must hold only named tensors"
            )
    return dict(loaded), PICKLE_WEIGHTS_NAME


def write_converted_checkpoint(
    source: Path, target: Path, family: Any, config: Any, state_dict: dict[str, torch.Tensor]
) -> None:
    """Config, safetensors weights and `source`'s tokenizer into `target`, complete or not at all.

    The written directory is read back as ``family``'s (a
    :class:`~benchmark.model.families.base.ModelFamily` class: its config, and the weights
    against the tensors its model holds) before it is moved into place."""
    from safetensors.torch import save_file

    staging = target.with_name(f".{target.name}.converting")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        config.save_pretrained(str(staging))
        save_file(state_dict, str(staging / WEIGHTS_NAME), metadata={"format": "pt"})
        _write_tokenizer(source, staging)
        written = family.read_config(staging)
        validate_safetensors_file(staging / WEIGHTS_NAME,
                                  tensor_spec(family.model_class(), written),
                                  check_values=False)  # fmt: skip
        staging.replace(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _write_tokenizer(source: Path, target: Path) -> None:
    """Copy the tokenizer files and write `tokenizer.json` with T5Tokenizer's sentinel ids.

    The public code's `T5Tokenizer` appends `extra_ids` (100 by default) sentinels after the
    SentencePiece pieces, `<extra_id_0>` last; the saved `tokenizer.json` keeps those ids.
    """
    from transformers import T5Tokenizer

    for name in _TOKENIZER_FILES:
        if (source / name).is_file():
            shutil.copyfile(source / name, target / name)
    if (source / "tokenizer.json").is_file():
        shutil.copyfile(source / "tokenizer.json", target / "tokenizer.json")
        return
    if not (source / "spiece.model").is_file():
        raise CheckpointError(f"{source}: no spiece.model or tokenizer.json (the T5 tokenizer)")
    settings = read_hub_json(source / "tokenizer_config.json") if (
        source / "tokenizer_config.json").is_file() else {}
    extra_ids = int(settings.get("extra_ids", T5_EXTRA_IDS))
    tokenizer = T5Tokenizer.from_pretrained(str(target), local_files_only=True, extra_ids=extra_ids)
    tokenizer.save_pretrained(str(target))
