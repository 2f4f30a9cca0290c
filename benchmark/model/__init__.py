"""The VT5 model (T5 + spatial + visual embeddings) in transformers.

Public API: `VT5Config`, `VT5ForConditionalGeneration`, `VT5Processor`, `load_model`,
`load_processor`, `save_checkpoint`, the shapes `tiny_vt5_config` / `base_vt5_config`, and the
checkpoint checks `expected_tensor_spec` / `validate_safetensors_file` / `validate_checkpoint_dir`.

The names are imported on first use (PEP 562), so a module that needs only the torch-free
safetensors checks of `benchmark.model.checkpoint` (the scoring service's upload route) does not
load torch and transformers.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "length_grouped_batches": "batching",
    "CheckpointError": "checkpoint",
    "expected_tensor_spec": "checkpoint",
    "read_checkpoint_config": "checkpoint",
    "validate_checkpoint_dir": "checkpoint",
    "validate_safetensors_file": "checkpoint",
    "PROMPT_BOX": "configuration_vt5",
    "VT5Config": "configuration_vt5",
    "convert_reference_checkpoint": "conversion",
    "BASE_MODEL_DIR": "loading",
    "load_model": "loading",
    "load_processor": "loading",
    "resolve_checkpoint": "loading",
    "save_checkpoint": "loading",
    "VT5ForConditionalGeneration": "modeling_vt5",
    "base_vt5_config": "presets",
    "tiny_vt5_config": "presets",
    "PROMPT_TEMPLATE": "processing_vt5",
    "VT5Processor": "processing_vt5",
    "load_tokenizer": "tokenizer",
    "train_spiece_model": "tokenizer",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first use."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))
