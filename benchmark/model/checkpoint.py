"""Checkpoint directories: what a checkpoint directory holds and how its files are named.

A directory holds `config.json` (its model_type names the family, e.g. "vt5"),
`model.safetensors` (the tensors under the names ``save_pretrained`` writes,
:func:`disk_state_dict`) and the tokenizer. Its config is read within a size limit
(:func:`read_config_object`); reading it as a family's configuration and checking the weights
against that family's model is :mod:`benchmark.model.family_checkpoint`'s; loading and saving
are in ``benchmark.model.loading``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmark.model.safetensors_header import CheckpointError, TensorSpec
from benchmark.strict_json import JsonLimits, JsonRefused, read_json_object

if TYPE_CHECKING:
    import torch

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
#: Largest accepted config.json.
MAX_CONFIG_BYTES = 1024 * 1024
#: Limits of a checkpoint directory's JSON files (its config, its tokenizer's, the public
#: checkpoint's): transformers writes more keys than an upload's metadata holds (a T5
#: tokenizer_config.json lists its 100 sentinel tokens, six keys each) and longer numbers
#: (``model_max_length`` 1e30 is written as 31 digits).
CHECKPOINT_JSON_LIMITS = JsonLimits(max_number_chars=64, max_keys=100_000)


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


def read_checkpoint_json(path: Path, *, max_bytes: int) -> dict[str, Any]:
    """A JSON object of a checkpoint directory, read with the kit's one strict reader
    (:mod:`benchmark.strict_json`).

    Args:
        path: the file (it must exist).
        max_bytes: the largest size accepted.

    Returns:
        The object.

    Raises:
        CheckpointError: naming the file, when it is too large, not valid JSON, not an object
            or beyond :data:`CHECKPOINT_JSON_LIMITS`.
    """
    try:
        return read_json_object(path, max_bytes=max_bytes, limits=CHECKPOINT_JSON_LIMITS)
    except JsonRefused as error:
        detail = f"not valid JSON ({error})" if error.malformed else str(error)
        raise CheckpointError(f"{path}: {detail}") from None


def read_config_object(directory: str | Path) -> tuple[Path, dict[str, Any]]:
    """The ``config.json`` object of a checkpoint directory, read within :data:`MAX_CONFIG_BYTES`.

    Args:
        directory: the checkpoint directory.

    Returns:
        The config file's path and its object (not yet read as any family's configuration).

    Raises:
        CheckpointError: if the directory or its config is missing or unreadable.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise CheckpointError(f"{directory}: checkpoint directory not found")
    config_path = directory / CONFIG_NAME
    if not config_path.is_file():
        raise CheckpointError(
            f"{config_path}: missing; a checkpoint directory holds {CONFIG_NAME}, "
            f"{WEIGHTS_NAME} and the tokenizer (spiece.model / tokenizer.json)"
        )
    return config_path, read_checkpoint_json(config_path, max_bytes=MAX_CONFIG_BYTES)


def tensor_spec(model_class: type, config: Any) -> TensorSpec:
    """Names, shapes and dtypes of the tensors ``save_pretrained`` writes for ``model_class``
    built from ``config``: the model is built on the meta device (no memory, no initialisation),
    tied aliases are dropped and the names are the file's (:func:`disk_state_dict`)."""
    import torch

    with torch.device("meta"):
        model = model_class(config)
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
