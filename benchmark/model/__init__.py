"""The VT5 model (T5 + spatial + visual embeddings) in transformers.

Public API: `VT5Config`, `VT5ForConditionalGeneration`, `VT5Processor`, `load_model`,
`load_processor`, `save_checkpoint`, the shapes `tiny_vt5_config` / `base_vt5_config`, and the
checkpoint checks `expected_tensor_spec` / `validate_safetensors_file` / `validate_checkpoint_dir`,
and track 3's per-client personalisations (`read_personalisations`, `write_personalisations`,
`personalised`).

The names are imported on first use, so a module that needs only the torch-free safetensors
checks of `benchmark.model.checkpoint_validation` (the scoring service's upload route) or a command's
options does not load torch and transformers.
"""

from __future__ import annotations

from benchmark.lazy_exports import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, {
    "batching": ("length_grouped_batches",),
    "checkpoint": ("disk_state_dict", "file_names"),
    "family_checkpoint": ("expected_tensor_spec", "read_checkpoint_config",
                          "validate_checkpoint_dir"),
    "checkpoint_validation": ("validate_safetensors_file",),
    "safetensors_header": ("CheckpointError",),
    "configuration_vt5": ("PROMPT_BOX", "VT5Config"),
    "conversion": ("convert_reference_checkpoint",),
    "loading": ("BASE_MODEL_DIR", "load_model", "load_processor", "resolve_checkpoint",
                "save_checkpoint"),
    "modeling_vt5": ("VT5ForConditionalGeneration",),
    "personalisation": ("PersonalisationError", "Personalisations", "personalised",
                        "read_personalisations", "write_personalisations"),
    "presets": ("base_vt5_config", "tiny_vt5_config"),
    "processing_vt5": ("PROMPT_TEMPLATE", "VT5Processor"),
    "tokenizer": ("load_tokenizer", "train_spiece_model"),
})  # fmt: skip
