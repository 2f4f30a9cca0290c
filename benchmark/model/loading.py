"""Loading and saving checkpoint directories of any family; the word `base` names the shipped
model.

A checkpoint directory holds `config.json` (its model_type names the family,
:mod:`benchmark.model.families`), `model.safetensors` and the tokenizer (`tokenizer.json`,
`tokenizer_config.json`, `spiece.model`). Loading validates the files first
(`benchmark.model.checkpoint`), so a bad directory fails with a message that names the file,
and nothing is ever unpickled; no family loads remote code.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch

from benchmark.model.families import DocumentProcessor, family_named
from benchmark.model.family_checkpoint import read_checkpoint_config, validate_checkpoint_dir
from benchmark.shipped import BASE_MODEL_DIR

BASE_NAME = "base"


def resolve_checkpoint(path_or_base: str | Path) -> Path:
    """The directory a checkpoint argument names (`base` is the shipped model).

    Args:
        path_or_base: a checkpoint directory or the word `base`.

    Returns:
        The directory.

    Raises:
        FileNotFoundError: if `base` is asked for but has not been created yet, or the
            directory does not exist.
    """
    if str(path_or_base) == BASE_NAME:
        if not (BASE_MODEL_DIR / "config.json").is_file():
            raise FileNotFoundError(
                f"the shipped base model is missing ({BASE_MODEL_DIR} has no config.json); "
                "`pflkit pretrain` creates it"
            )
        return BASE_MODEL_DIR
    directory = Path(path_or_base)
    if not directory.is_dir():
        raise FileNotFoundError(
            f"{directory}: checkpoint directory not found (pass a directory written by "
            "save_checkpoint, or `base` for the shipped model)"
        )
    return directory


def load_model(path_or_base: str | Path, *, check_values: bool = True) -> Any:
    """Load a checkpoint of any family in evaluation mode after validating its files.

    Args:
        path_or_base: a checkpoint directory or `base`.
        check_values: refuse NaN or infinite weights (reads every tensor once more).

    Returns:
        The family's model (fp32, CPU, `eval()` mode), e.g. a ``VT5ForConditionalGeneration``.

    Raises:
        FileNotFoundError: if the directory does not exist.
        benchmark.model.safetensors_header.CheckpointError: for a missing or invalid config or weights.
    """
    directory = resolve_checkpoint(path_or_base)
    config = validate_checkpoint_dir(directory, check_values=check_values)
    model_class = family_named(config.model_type).model_class()
    model = model_class.from_pretrained(
        str(directory), config=config, local_files_only=True, dtype=torch.float32
    )
    return model.eval()


def load_processor(path_or_base: str | Path) -> DocumentProcessor:
    """Load the processor (tokenizer + input settings) of a checkpoint directory or `base`."""
    directory = resolve_checkpoint(path_or_base)
    return family_named(read_checkpoint_config(directory).model_type).load_processor(directory)


def save_checkpoint(model: Any, processor: Any, directory: str | Path) -> Path:
    """Write model and processor to a directory atomically (complete or not at all).

    The files are written to a temporary directory next to the target, which then replaces it.

    Args:
        model: the model to save.
        processor: its processor (the tokenizer files are written alongside).
        directory: the target checkpoint directory.

    Returns:
        The target directory.
    """
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    try:
        model.save_pretrained(str(staging), safe_serialization=True)
        processor.save_pretrained(staging)
        old = None
        if directory.exists():
            old = directory.with_name(f".{directory.name}.old-{os.getpid()}")
            os.replace(directory, old)
        os.replace(staging, directory)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    processor._source_dir = directory
    return directory
