"""A random VT5 checkpoint written as the public VT5 code saves it, and its DiT directory.

The public layout: a T5 `config.json` (model_type "t5"), `pytorch_model.bin` holding `HF_VT5`'s
state dict (the token embedding under its three names, `lm_head` as a tensor of its own, which
the public code's fine-tuning moves away from `shared`), `spiece.model`, and a DiT directory
whose `preprocessor_config.json` asks for bilinear resizing and whose config has no mask token.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch

from benchmark.communication_log import LM_HEAD_NAME, TOKEN_EMBEDDING_NAMES
from benchmark.model import (
    VT5ForConditionalGeneration,
    VT5Processor,
    load_tokenizer,
    save_checkpoint,
    tiny_vt5_config,
)
from tests.benchmark.model.official_pipeline import EXTRA_IDS

DIT_FLAGS = {"use_mask_token": False, "use_mean_pooling": True, "image_size": 64,
             "use_absolute_position_embeddings": True, "drop_path_rate": 0.0,
             "patch_size": 16, "hidden_size": 64, "intermediate_size": 128,
             "num_hidden_layers": 1, "num_attention_heads": 2}
T5_SMALL = {"d_model": 64, "d_kv": 16, "d_ff": 128, "num_layers": 2, "num_decoder_layers": 2,
            "num_heads": 4, "initializer_factor": 8.0}


def write_public_layout(root: Path, spiece_dir: Path) -> tuple[Path, Path]:
    """A random VT5 saved as the public code saves it, and its DiT directory."""
    import sentencepiece as spm
    from safetensors.torch import load_file, save_file

    n_pieces = spm.SentencePieceProcessor(model_file=str(spiece_dir / "spiece.model")).get_piece_size()
    config = tiny_vt5_config(
        n_pieces + EXTRA_IDS, language_config=T5_SMALL, visual_config=DIT_FLAGS,
        spatial_embedding_dim=None, box_scale=1.0,
    )
    torch.manual_seed(7)
    model = VT5ForConditionalGeneration(config).eval()
    with torch.no_grad():  # random weights answer "" at once; damp EOS and padding
        embedding = model.language_backbone.shared.weight
        embedding[config.pad_token_id] = 0
        embedding[config.eos_token_id] *= 0.5
    staging = save_checkpoint(model, VT5Processor.from_config(load_tokenizer(spiece_dir), config)
                              .with_spiece_model(spiece_dir), root / "kit-layout")
    state = load_file(str(staging / "model.safetensors"))
    for name in TOKEN_EMBEDDING_NAMES[1:]:
        state[name] = state[TOKEN_EMBEDDING_NAMES[0]].clone()
    # the public code trains lm_head apart from shared: a fine-tuned file holds two tensors
    generator = torch.Generator().manual_seed(11)
    shared = state[TOKEN_EMBEDDING_NAMES[0]]
    state[LM_HEAD_NAME] = shared + 0.3 * shared.std() * torch.randn(shared.shape, generator=generator)
    public = root / "public"
    public.mkdir()
    torch.save(state, public / "pytorch_model.bin")
    t5 = {**config.t5_config.to_dict(), "model_type": "t5", "max_2d_position_embeddings": 1024,
          "architectures": ["HF_VT5"]}
    (public / "config.json").write_text(json.dumps(t5))
    shutil.copyfile(spiece_dir / "spiece.model", public / "spiece.model")
    (public / "tokenizer_config.json").write_text(json.dumps({"extra_ids": EXTRA_IDS}))
    dit = root / "dit"
    dit.mkdir()
    (dit / "config.json").write_text(json.dumps({"model_type": "beit", **DIT_FLAGS}))
    (dit / "preprocessor_config.json").write_text(json.dumps({
        "do_resize": True, "size": 64, "resample": 2, "do_center_crop": False,
        "do_normalize": True, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
        "image_processor_type": "BeitImageProcessor",
    }))
    visual = {name.removeprefix("visual_embedding.image_model."): tensor
              for name, tensor in state.items() if name.startswith("visual_embedding.image_model.")}
    save_file(visual, str(dit / "model.safetensors"), metadata={"format": "pt"})
    shutil.rmtree(staging)
    return public, dit
