"""Turn a checkpoint of the public VT5 code (e.g. `rubentito/vt5-base-spdocvqa`) into a kit one.

The public code (rubenpt91/PFL-DocVQA-Competition, `models/VT5.py`) saves a plain T5
`config.json` (model_type "t5") and the state dict of its `HF_VT5`, usually as
`pytorch_model.bin`; the DiT image encoder it loads is a separate BEiT directory (its YAML's
`visual_module.model_weights`, `microsoft/dit-base-finetuned-rvlcdip`) whose
`preprocessor_config.json` decides how pages are resized. Its pipeline also lower-cases OCR words
and answers, casts [0, 1] boxes to integer buckets without rescaling, and generates with
transformers' default `max_length` 20 (19 answer tokens). Conversion records all of that in the
kit's `VT5Config`, so that every consumer of the checkpoint (training, `pflkit evaluate`, the
bench, the scoring worker) reads the same settings.

What is read from the checkpoint rather than assumed:
- the BEiT architecture flags (`use_mask_token`, `use_mean_pooling`, absolute or relative
  positions, layer scale) and sizes come from the DiT `config.json` when one is given, and are
  checked against the tensors; without one they are read off the tensors themselves;
- the resize filter, normalisation and image size come from `preprocessor_config.json`;
- the T5 token embedding may be stored under any of its three names (`shared`, encoder and
  decoder `embed_tokens`, one module in the public code); all copies must be equal and one is
  kept;
- `lm_head` is kept as a tensor of its own (`VT5Config.tie_lm_head = False`): the public
  `HF_VT5` never re-ties its inner T5 after loading, so the public code trained `lm_head` apart
  from `shared` and a checkpoint it fine-tuned holds two different tensors. A file without
  `lm_head.weight` gets a copy of `shared` (what a tied model computes).

`pytorch_model.bin` is read with `torch.load(weights_only=True)`: it is the organisers' own
file, and this path is never reachable from an upload (submissions are safetensors only).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from benchmark.communication_log import LM_HEAD_NAME, TOKEN_EMBEDDING_NAMES
from benchmark.model.checkpoint import CONFIG_NAME
from benchmark.model.configuration_vt5 import RESAMPLE_FILTERS, VT5Config
from benchmark.model.families.vt5 import VT5
from benchmark.model.family_checkpoint import expected_tensor_spec
from benchmark.model.hub_checkpoint import (
    read_hub_json,
    read_public_weights,
    write_converted_checkpoint,
)
from benchmark.model.safetensors_header import CheckpointError

PREPROCESSOR_NAME = "preprocessor_config.json"
#: Answer tokens the public code generates: transformers' default max_length 20 minus the
#: decoder start token.
PUBLIC_MAX_ANSWER_TOKENS = 19
VISUAL_PREFIX = "visual_embedding.image_model."

_T5_KEYS = (
    "vocab_size", "d_model", "d_kv", "d_ff", "num_layers", "num_decoder_layers", "num_heads",
    "relative_attention_num_buckets", "relative_attention_max_distance", "dropout_rate",
    "layer_norm_epsilon", "initializer_factor", "feed_forward_proj", "pad_token_id",
    "eos_token_id", "decoder_start_token_id", "tie_word_embeddings",
)
_BEIT_KEYS = (
    "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "hidden_act",
    "hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range", "layer_norm_eps",
    "image_size", "patch_size", "num_channels", "use_mask_token",
    "use_absolute_position_embeddings", "use_relative_position_bias",
    "use_shared_relative_position_bias", "layer_scale_init_value", "drop_path_rate",
    "use_mean_pooling",
)


@dataclass
class ConversionReport:
    """What a conversion read, checked and recorded (printed by `pflkit model convert`)."""

    config: VT5Config
    weights_file: str
    tensors: int
    tied_names: list[str] = field(default_factory=list)
    lm_head: str = ""
    cast_to_float32: list[str] = field(default_factory=list)
    visual_source: str = ""
    image_source: str = ""

    def lines(self) -> list[str]:
        """Human-readable summary, one fact per line."""
        config = self.config
        return [
            f"weights: {self.weights_file} ({self.tensors} tensors)",
            "T5 token embedding stored as "
            + (", ".join(name.removeprefix("language_backbone.") for name in self.tied_names)
               or "(none found)")
            + ": all equal, kept once as language_backbone.shared.weight",
            f"lm_head: {self.lm_head}",
            f"cast to float32: {len(self.cast_to_float32)} tensor(s)",
            f"image encoder: {self.visual_source}",
            f"image processing: {self.image_source}",
            f"recorded settings: box_scale={config.box_scale:g}, "
            f"lowercase_text={config.lowercase_text}, image_resample={config.image_resample}, "
            f"image_size={config.image_size}, image_mean={config.image_mean}, "
            f"image_std={config.image_std}, max_answer_tokens={config.max_answer_tokens}, "
            f"max_input_tokens={config.max_input_tokens}",
        ]


def convert_reference_checkpoint(
    source: str | Path,
    target: str | Path,
    *,
    visual_dir: str | Path | None = None,
    visual_config: Mapping[str, Any] | None = None,
    box_scale: float = 1.0,
) -> VT5Config:
    """Write a kit checkpoint directory from a public-VT5-code checkpoint directory.

    Args:
        source: directory with the T5 `config.json`, `pytorch_model.bin` or
            `model.safetensors`, and the tokenizer (`spiece.model`, `tokenizer_config.json`).
        target: the kit checkpoint directory to write (must not exist).
        visual_dir: the DiT directory the public code loaded (`config.json`, and
            `preprocessor_config.json` unless the source has one).
        visual_config: `BeitConfig` settings of the image encoder, instead of `visual_dir`.
        box_scale: box scaling the checkpoint was trained with (1 for the public code).

    Returns:
        The written configuration.

    Raises:
        CheckpointError: if a file is missing or unreadable, the weights hold anything but
            tensors, tied copies differ, or configs and tensors disagree.
        FileExistsError: if the target exists.
    """
    return convert_public_checkpoint(
        source, target, visual_dir=visual_dir, visual_config=visual_config, box_scale=box_scale
    ).config


def convert_public_checkpoint(
    source: str | Path,
    target: str | Path,
    *,
    visual_dir: str | Path | None = None,
    visual_config: Mapping[str, Any] | None = None,
    box_scale: float = 1.0,
) -> ConversionReport:
    """`convert_reference_checkpoint`, returning the full report of what was done."""
    source, target = Path(source), Path(target)
    if target.exists():
        raise FileExistsError(f"{target}: already exists; choose a new directory")
    raw = read_hub_json(source / CONFIG_NAME)
    if raw.get("model_type") != "t5":
        raise CheckpointError(
            f"{source / CONFIG_NAME}: model_type is {raw.get('model_type')!r}; the public VT5 "
            "code saves a T5 config (model_type 't5')"
        )
    state_dict, weights_file = read_public_weights(source)
    visual_keys = {
        name.removeprefix(VISUAL_PREFIX): tuple(tensor.shape)
        for name, tensor in state_dict.items() if name.startswith(VISUAL_PREFIX)
    }
    beit, visual_source = _visual_config(visual_dir, visual_config, visual_keys)
    image, image_source = _image_settings(source, visual_dir, beit)
    config = VT5Config(
        language_config={key: raw[key] for key in _T5_KEYS if key in raw},
        visual_config=beit,
        max_2d_position_embeddings=raw.get("max_2d_position_embeddings", 1024),
        box_scale=box_scale,
        max_input_tokens=int(raw.get("max_input_tokens", 512)),
        max_answer_tokens=PUBLIC_MAX_ANSWER_TOKENS,
        lowercase_text=True,
        tie_lm_head=False,
        **image,
    )
    spec = expected_tensor_spec(config)
    tied = _fold_token_embedding(state_dict, spec, source / weights_file)
    lm_head = _untied_lm_head(state_dict)
    cast = [name for name, tensor in state_dict.items()
            if tensor.is_floating_point() and tensor.dtype != torch.float32]
    state_dict = {name: tensor.float() if name in cast else tensor.contiguous()
                  for name, tensor in state_dict.items()}
    write_converted_checkpoint(source, target, VT5, config, state_dict)
    return ConversionReport(
        config=config, weights_file=weights_file, tensors=len(state_dict), tied_names=tied,
        lm_head=lm_head, cast_to_float32=cast, visual_source=visual_source, image_source=image_source,
    )


def _fold_token_embedding(
    state_dict: dict[str, torch.Tensor], spec: Mapping[str, Any], where: Path
) -> list[str]:
    """Keep one copy of the T5 token embedding, after checking that every stored copy is equal.

    `shared` and the encoder's and decoder's `embed_tokens` are one module in the public code,
    so copies that differ mean the file was not written by it.

    Returns:
        The names the file held the embedding under.

    Raises:
        CheckpointError: when two copies differ.
    """
    kept = TOKEN_EMBEDDING_NAMES[0]
    names = [name for name in TOKEN_EMBEDDING_NAMES
             if name in state_dict and (name == kept or name not in spec)]
    if not names:
        return []
    reference = state_dict[names[0]]
    for name in names[1:]:
        if state_dict[name].shape != reference.shape or not torch.equal(state_dict[name], reference):
            raise CheckpointError(
                f"{where}: {name} differs from {names[0]}; the public VT5 code holds the T5 "
                "token embedding once (shared is the encoder's and decoder's embed_tokens), so "
                "all its copies must be equal (this file was not saved by the public VT5 code)"
            )
    state_dict[kept] = reference
    for name in names:
        if name != kept:
            del state_dict[name]
    return names


def _untied_lm_head(state_dict: dict[str, torch.Tensor]) -> str:
    """Keep `lm_head` as a tensor of its own (a copy of `shared` when the file has none).

    Returns:
        What was found, for the conversion report.
    """
    shared = state_dict.get(TOKEN_EMBEDDING_NAMES[0])
    if LM_HEAD_NAME not in state_dict:
        if shared is None:
            return "not in the file"
        state_dict[LM_HEAD_NAME] = shared.clone()
        return "not in the file: starts as a copy of shared, trained apart from it"
    if shared is not None and torch.equal(state_dict[LM_HEAD_NAME], shared):
        return "equal to shared; kept as its own tensor, trained apart as in the public code"
    return "differs from shared (trained apart by the public code); kept as its own tensor"


def _visual_config(
    visual_dir: str | Path | None,
    visual_config: Mapping[str, Any] | None,
    tensors: Mapping[str, tuple[int, ...]],
) -> tuple[dict[str, Any], str]:
    """The BEiT settings: from the DiT config when given, checked against the tensors."""
    from transformers import BeitConfig

    from_tensors = beit_settings_from_tensors(tensors)
    if visual_dir is not None:
        path = Path(visual_dir) / CONFIG_NAME
        raw = read_hub_json(path)
        if raw.get("model_type") not in (None, "beit"):
            raise CheckpointError(
                f"{path}: model_type is {raw.get('model_type')!r}; the image encoder is a "
                "BEiT/DiT model"
            )
        # a key the file leaves out takes BeitConfig's default, as in the public code's loader
        defaults = BeitConfig().to_dict()
        given = {key: raw.get(key, defaults[key]) for key in _BEIT_KEYS if key in raw or key in defaults}
        origin = str(path)
    elif visual_config is not None:
        given, origin = {key: value for key, value in visual_config.items()
                         if key != "model_type"}, "the given visual_config"
    else:
        heads = {"num_attention_heads": max(1, from_tensors["hidden_size"] // 64)}
        return ({**heads, **from_tensors},
                "architecture read off the checkpoint's tensors (no DiT config given; 64 "
                "dimensions per attention head, the BEiT/DiT convention)")
    for key, value in from_tensors.items():
        if key in given and given[key] != value:
            raise CheckpointError(
                f"{origin}: {key} is {given[key]!r} but the checkpoint's image-encoder tensors "
                f"say {value!r}; pass the DiT config the checkpoint was trained with"
            )
    return {**from_tensors, **given}, origin


def beit_settings_from_tensors(tensors: Mapping[str, tuple[int, ...]]) -> dict[str, Any]:
    """BEiT settings that a state dict of `BeitModel` determines by itself.

    Args:
        tensors: `{name without the image-model prefix: shape}`.

    Returns:
        Sizes and flags (`use_mask_token`, `use_mean_pooling`, absolute/relative positions,
        layer scale). The head count is not among them: no tensor shape determines it.

    Raises:
        CheckpointError: if the tensors are not those of a BEiT encoder.
    """
    try:
        hidden = tensors["embeddings.cls_token"][-1]
        patch = tensors["embeddings.patch_embeddings.projection.weight"][-1]
    except KeyError as missing:
        raise CheckpointError(
            f"the checkpoint has no image-encoder tensor {VISUAL_PREFIX}{missing.args[0]}; it is "
            "not a VT5 checkpoint with a BEiT/DiT image encoder"
        ) from None
    layers = {int(name.split(".")[2]) for name in tensors if name.startswith("encoder.layer.")}
    settings: dict[str, Any] = {
        "hidden_size": hidden,
        "patch_size": patch,
        "num_hidden_layers": len(layers),
        "use_mask_token": "embeddings.mask_token" in tensors,
        "use_absolute_position_embeddings": "embeddings.position_embeddings" in tensors,
        "use_relative_position_bias": any(
            ".attention.attention.relative_position_bias." in name for name in tensors),
        "use_shared_relative_position_bias": any(
            name.startswith("encoder.relative_position_bias.") for name in tensors),
        "use_mean_pooling": "pooler.layernorm.weight" in tensors,
    }
    if layers:
        settings["intermediate_size"] = tensors["encoder.layer.0.intermediate.dense.weight"][0]
        if "encoder.layer.0.lambda_1" not in tensors:
            settings["layer_scale_init_value"] = 0.0
    if settings["use_absolute_position_embeddings"]:
        side = math.isqrt(tensors["embeddings.position_embeddings"][1] - 1)
        settings["image_size"] = side * patch
    return settings


def _image_settings(
    source: Path, visual_dir: str | Path | None, beit: Mapping[str, Any]
) -> tuple[dict[str, Any], str]:
    """Resize filter, normalisation and size from the image processor's config."""
    candidates = [source / PREPROCESSOR_NAME]
    if visual_dir is not None:
        candidates.append(Path(visual_dir) / PREPROCESSOR_NAME)
    path = next((candidate for candidate in candidates if candidate.is_file()), None)
    if path is None:
        return (
            {"image_resample": "bilinear"},
            "no preprocessor_config.json: the DiT image processor's defaults (bilinear, "
            "mean and std 0.5)",
        )
    raw = read_hub_json(path)
    code = raw.get("resample", RESAMPLE_FILTERS["bilinear"])
    names = {number: name for name, number in RESAMPLE_FILTERS.items()}
    if code not in names:
        raise CheckpointError(f"{path}: resample {code!r} is not a PIL filter code (0 to 5)")
    if raw.get("do_center_crop"):
        raise CheckpointError(
            f"{path}: do_center_crop is set; the kit resizes whole pages and has no crop step"
        )
    size = raw.get("size", beit.get("image_size", 224))
    if isinstance(size, Mapping):
        size = size.get("height", size.get("shortest_edge"))
    if beit.get("image_size") is not None and size != beit["image_size"]:
        raise CheckpointError(
            f"{path}: resizes to {size} px but the image encoder takes "
            f"{beit['image_size']} px pages"
        )
    settings = {"image_resample": names[code]}
    for key in ("image_mean", "image_std"):
        if key in raw:
            settings[key] = list(raw[key])
    return settings, str(path)


