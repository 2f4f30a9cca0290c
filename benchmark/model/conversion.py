"""Turn a checkpoint of the public VT5 code (e.g. `rubentito/vt5-base-spdocvqa`) into a kit one.

The public code saves its model with a plain T5 `config.json` (model_type "t5", the DiT settings
live in its experiment YAML) and the state dict that `VT5ForConditionalGeneration` already uses.
Conversion writes a `VT5Config` (T5 settings from the file, DiT-base for the image encoder, box
scale 1 as the public code had no rescaling) next to the same weights and tokenizer files.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from benchmark.model.checkpoint import WEIGHTS_NAME, CheckpointError, validate_checkpoint_dir
from benchmark.model.configuration_vt5 import VT5Config
from benchmark.model.presets import DIT_BASE

_T5_KEYS = (
    "vocab_size", "d_model", "d_kv", "d_ff", "num_layers", "num_decoder_layers", "num_heads",
    "relative_attention_num_buckets", "relative_attention_max_distance", "dropout_rate",
    "layer_norm_epsilon", "initializer_factor", "feed_forward_proj", "pad_token_id",
    "eos_token_id", "decoder_start_token_id", "tie_word_embeddings",
)
_TOKENIZER_FILES = ("spiece.model", "tokenizer.json", "tokenizer_config.json",
                    "special_tokens_map.json")


def convert_reference_checkpoint(
    source: str | Path,
    target: str | Path,
    *,
    visual_config: dict[str, Any] | None = None,
    box_scale: float = 1.0,
) -> VT5Config:
    """Write a kit checkpoint directory from a public-VT5-code checkpoint directory.

    Args:
        source: directory with the T5 `config.json`, `model.safetensors` and the tokenizer.
        target: the kit checkpoint directory to write (must not exist).
        visual_config: `BeitConfig` settings of the image encoder (default: DiT-base).
        box_scale: box scaling the checkpoint was trained with (1 for the public code).

    Returns:
        The written configuration.

    Raises:
        CheckpointError: if the source is not a T5-config checkpoint with safetensors weights,
            or the weights do not match the configuration.
        FileExistsError: if the target exists.
    """
    source, target = Path(source), Path(target)
    config_path = source / "config.json"
    if not config_path.is_file():
        raise CheckpointError(f"{config_path}: missing")
    raw = json.loads(config_path.read_text(encoding="utf-8"))
    if raw.get("model_type") != "t5":
        raise CheckpointError(
            f"{config_path}: model_type is {raw.get('model_type')!r}; the public VT5 code saves a "
            "T5 config (model_type 't5')"
        )
    if not (source / WEIGHTS_NAME).is_file():
        raise CheckpointError(
            f"{source / WEIGHTS_NAME}: missing; only safetensors weights are read (convert a "
            "trusted pytorch_model.bin with safetensors first)"
        )
    if target.exists():
        raise FileExistsError(f"{target}: already exists")
    config = VT5Config(
        language_config={key: raw[key] for key in _T5_KEYS if key in raw},
        visual_config=dict(visual_config if visual_config is not None else DIT_BASE),
        max_2d_position_embeddings=raw.get("max_2d_position_embeddings", 1024),
        box_scale=box_scale,
    )
    staging = target.with_name(f".{target.name}.converting")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        config.save_pretrained(str(staging))
        shutil.copyfile(source / WEIGHTS_NAME, staging / WEIGHTS_NAME)
        for name in _TOKENIZER_FILES:
            if (source / name).is_file():
                shutil.copyfile(source / name, staging / name)
        validate_checkpoint_dir(staging, check_values=False)
        staging.replace(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return config
