"""The VT5 model (T5 + spatial + visual embeddings) in transformers.

Public API: `VT5Config`, `VT5ForConditionalGeneration`, `VT5Processor`, `load_model`,
`load_processor`, `save_checkpoint`, the shapes `tiny_vt5_config` / `base_vt5_config`, and the
checkpoint checks `expected_tensor_spec` / `validate_safetensors_file` / `validate_checkpoint_dir`,
and track 3's per-client personalisations (`read_personalisations`, `write_personalisations`,
`personalised`).
"""

from benchmark.model.batching import length_grouped_batches
from benchmark.model.checkpoint import (
    CheckpointError,
    disk_state_dict,
    expected_tensor_spec,
    read_checkpoint_config,
    validate_checkpoint_dir,
    validate_safetensors_file,
)
from benchmark.model.configuration_vt5 import PROMPT_BOX, VT5Config
from benchmark.model.conversion import convert_reference_checkpoint
from benchmark.model.loading import (
    BASE_MODEL_DIR,
    load_model,
    load_processor,
    resolve_checkpoint,
    save_checkpoint,
)
from benchmark.model.modeling_vt5 import VT5ForConditionalGeneration
from benchmark.model.personalisation import (
    PersonalisationError,
    Personalisations,
    personalised,
    read_personalisations,
    write_personalisations,
)
from benchmark.model.presets import base_vt5_config, tiny_vt5_config
from benchmark.model.processing_vt5 import PROMPT_TEMPLATE, VT5Processor
from benchmark.model.tokenizer import load_tokenizer, train_spiece_model

__all__ = [
    "BASE_MODEL_DIR",
    "PROMPT_BOX",
    "PROMPT_TEMPLATE",
    "CheckpointError",
    "PersonalisationError",
    "Personalisations",
    "VT5Config",
    "VT5ForConditionalGeneration",
    "VT5Processor",
    "base_vt5_config",
    "convert_reference_checkpoint",
    "disk_state_dict",
    "expected_tensor_spec",
    "length_grouped_batches",
    "load_model",
    "load_processor",
    "load_tokenizer",
    "personalised",
    "read_personalisations",
    "read_checkpoint_config",
    "resolve_checkpoint",
    "save_checkpoint",
    "tiny_vt5_config",
    "train_spiece_model",
    "validate_checkpoint_dir",
    "validate_safetensors_file",
    "write_personalisations",
]
