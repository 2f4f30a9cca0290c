"""A checkpoint directory read as a model of its family.

``config.json``'s ``model_type`` names the family (:mod:`benchmark.model.families`); the family
reads the configuration, and its model, built on the meta device, says which tensors
``model.safetensors`` must hold (:func:`expected_tensor_spec`). :func:`validate_checkpoint_dir`
checks a whole directory with the safetensors checks of
:mod:`benchmark.model.checkpoint_validation`. The files themselves (their names, the config's
size limit) are :mod:`benchmark.model.checkpoint`'s, which the families read too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmark.model.checkpoint import WEIGHTS_NAME, read_config_object, tensor_spec
from benchmark.model.checkpoint_validation import validate_safetensors_file
from benchmark.model.families import DEFAULT_FAMILY, FAMILIES, UnknownFamily, family_named
from benchmark.model.safetensors_header import CheckpointError, TensorSpec


def expected_tensor_spec(config: Any) -> TensorSpec:
    """Names, shapes and dtypes of the tensors `save_pretrained` writes for a configuration.

    The model of the configuration's family is built on the meta device (no memory, no
    initialisation), tied aliases (VT5's T5 embedding) are dropped and the names are those
    written to disk (transformers keeps VT5's original BEiT layout
    `image_model.encoder.layer.N.*` in files).

    Args:
        config: a family's configuration (its ``model_type`` names the family).

    Returns:
        `{name: (shape, safetensors dtype name)}` for every tensor the file must hold.
    """
    return tensor_spec(family_named(config.model_type).model_class(), config)


def read_checkpoint_config(directory: str | Path) -> Any:
    """Read and check the `config.json` of a checkpoint directory of any family.

    Args:
        directory: the checkpoint directory.

    Returns:
        The configuration of the family its ``model_type`` names
        (:mod:`benchmark.model.families`).

    Raises:
        CheckpointError: if the directory or its config is missing, unreadable or of no family
            the kit knows.
    """
    config_path, raw = read_config_object(directory)
    found = raw.get("model_type")
    try:
        family = family_named(found) if isinstance(found, str) else None
    except UnknownFamily:
        family = None
    if family is None:
        others = ", ".join(name for name in FAMILIES if name != DEFAULT_FAMILY)
        raise CheckpointError(
            f"{config_path}: model_type is {str(found)[:40]!r}, expected {DEFAULT_FAMILY!r} (or "
            f"another family the kit reads: {others}); this is not a VT5 checkpoint nor one of "
            "another family (`pflkit model convert` turns a public checkpoint into a kit one)"
        )
    return family.config_of(config_path, raw)


def validate_checkpoint_dir(directory: str | Path, *, check_values: bool = True) -> Any:
    """Check a checkpoint directory: its config and its weights against that config.

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
