"""A random VT5 written as the official starter kit saves it, and the same model in the kit's layout.

The GPU check (:mod:`bench.gpucheck`) times the official code against the kit on one model. The
official code reads the public layout (a T5 ``config.json`` with ``model_type`` "t5",
``pytorch_model.bin`` holding ``HF_VT5``'s state dict, ``spiece.model``, and a DiT directory it
loads through ``AutoModel``); the kit reads what ``pflkit model convert`` makes of that layout.
:func:`write_random_public_vt5` writes both from one random model, so both sides start from the
same weights and read the same settings (box scale 1, lower-cased text, 19 answer tokens, an
``lm_head`` of its own).

Shapes: ``vt5-base`` is the competition's (T5-base + DiT-base, the untied ``lm_head``:
336,142,080 parameters with the shipped tokenizer's 32,128 rows); ``tiny`` is a small shape the
official classes can build (box tables as wide as the model, as the official
``SpatialEmbeddings`` has them), for the CPU run of the check.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

#: T5Tokenizer's ``<extra_id_N>`` sentinels, appended after the SentencePiece pieces.
EXTRA_IDS = 100
#: the tiny shape's language and DiT sizes (every size the official classes read)
TINY_LANGUAGE = {"d_model": 64, "d_kv": 16, "d_ff": 128, "num_layers": 2,
                 "num_decoder_layers": 2, "num_heads": 4}  # fmt: skip
TINY_VISUAL = {"use_mask_token": False, "use_mean_pooling": True, "image_size": 64,
               "use_absolute_position_embeddings": True, "drop_path_rate": 0.0,
               "patch_size": 16, "hidden_size": 64, "intermediate_size": 128,
               "num_hidden_layers": 1, "num_attention_heads": 2}  # fmt: skip
SHAPES = ("tiny", "vt5-base")
VISUAL_PREFIX = "visual_embedding.image_model."
#: PIL's code for bilinear resizing, what the DiT image processor uses
BILINEAR = 2


def random_config(shape: str, vocab_size: int) -> Any:
    """The ``VT5Config`` of a random model in the public code's settings."""
    from benchmark.model.presets import base_vt5_config, tiny_vt5_config

    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; choose one of {', '.join(SHAPES)}")
    public = {"box_scale": 1.0, "lowercase_text": True, "tie_lm_head": False,
              "image_resample": "bilinear"}  # fmt: skip
    if shape == "vt5-base":
        return base_vt5_config(vocab_size, **public)
    return tiny_vt5_config(vocab_size, language_config=TINY_LANGUAGE, visual_config=TINY_VISUAL,
                           spatial_embedding_dim=None, **public)  # fmt: skip


def write_random_public_vt5(root: Path, shape: str, *, seed: int = 0) -> dict[str, Path]:
    """A random VT5 of ``shape`` with the shipped tokenizer, in both layouts.

    Returns:
        ``{"public": ..., "dit": ..., "kit": ...}``: the public checkpoint, its DiT directory,
        and the kit checkpoint ``pflkit model convert`` makes of them.
    """
    import sentencepiece as spm
    import torch
    from safetensors.torch import load_file

    from benchmark.model.conversion import convert_public_checkpoint
    from benchmark.model.loading import save_checkpoint
    from benchmark.model.modeling_vt5 import VT5ForConditionalGeneration
    from benchmark.model.processing_vt5 import VT5Processor
    from benchmark.model.tokenizer import load_tokenizer
    from benchmark.shipped import BASE_MODEL_DIR

    spiece = BASE_MODEL_DIR / "spiece.model"
    pieces = spm.SentencePieceProcessor(model_file=str(spiece)).get_piece_size()
    vocab = max(32128, pieces + EXTRA_IDS) if shape == "vt5-base" else pieces + EXTRA_IDS
    config = random_config(shape, vocab)
    torch.manual_seed(seed)
    model = VT5ForConditionalGeneration(config).eval()
    with torch.no_grad():  # random weights answer "" at once; damp EOS and padding
        embedding = model.language_backbone.shared.weight
        embedding[config.pad_token_id] = 0
        embedding[config.eos_token_id] *= 0.5
    root.mkdir(parents=True, exist_ok=True)
    # the kit's own file names the tensors as transformers 4 did, the names the public code reads
    staging = save_checkpoint(model, VT5Processor.from_config(load_tokenizer(BASE_MODEL_DIR), config)
                              .with_spiece_model(BASE_MODEL_DIR), root / "staging")  # fmt: skip
    state = load_file(str(staging / "model.safetensors"))
    public, dit = root / "public", root / "dit"
    _write_public(public, config, state, spiece)
    _write_dit(dit, config, state)
    shutil.rmtree(staging)
    convert_public_checkpoint(public, root / "kit", visual_dir=dit)
    return {"public": public, "dit": dit, "kit": root / "kit"}


def _write_public(public: Path, config: Any, state: dict[str, Any], spiece: Path) -> None:
    """The T5 config, the state dict as ``pytorch_model.bin`` and the tokenizer."""
    import torch

    from benchmark.communication_log import TOKEN_EMBEDDING_NAMES

    public.mkdir()
    for name in TOKEN_EMBEDDING_NAMES[1:]:  # the public state dict names the embedding thrice
        state[name] = state[TOKEN_EMBEDDING_NAMES[0]]
    torch.save(state, public / "pytorch_model.bin")
    t5 = {**config.t5_config.to_dict(), "model_type": "t5", "architectures": ["HF_VT5"],
          "max_2d_position_embeddings": config.max_2d_position_embeddings}  # fmt: skip
    (public / "config.json").write_text(json.dumps(t5))
    shutil.copyfile(spiece, public / "spiece.model")
    (public / "tokenizer_config.json").write_text(json.dumps({"extra_ids": EXTRA_IDS}))


def _write_dit(dit: Path, config: Any, state: dict[str, Any]) -> None:
    """The DiT directory: BEiT config, image processor settings and the encoder's weights."""
    import torch

    dit.mkdir()
    beit = {key: value for key, value in config.visual_config.items() if key != "model_type"}
    (dit / "config.json").write_text(json.dumps({"model_type": "beit", **beit}))
    (dit / "preprocessor_config.json").write_text(json.dumps({
        "do_resize": True, "size": config.image_size, "resample": BILINEAR,
        "do_center_crop": False, "do_normalize": True, "image_mean": config.image_mean,
        "image_std": config.image_std, "image_processor_type": "BeitImageProcessor",
    }))  # fmt: skip
    visual = {name.removeprefix(VISUAL_PREFIX): tensor.clone()
              for name, tensor in state.items() if name.startswith(VISUAL_PREFIX)}  # fmt: skip
    torch.save(visual, dit / "pytorch_model.bin")  # as the hub's DiT holds it
