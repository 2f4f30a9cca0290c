"""Model shapes: the real vt5-base layout and the kit's tiny CPU configuration."""

from __future__ import annotations

from typing import Any

from benchmark.model.configuration_vt5 import VT5Config

#: T5-base (Raffel et al., JMLR 2020), as in `rubentito/vt5-base-spdocvqa`.
T5_BASE = {
    "d_model": 768,
    "d_kv": 64,
    "d_ff": 3072,
    "num_layers": 12,
    "num_decoder_layers": 12,
    "num_heads": 12,
    "feed_forward_proj": "relu",
    "relative_attention_num_buckets": 32,
    "relative_attention_max_distance": 128,
    "dropout_rate": 0.1,
    "layer_norm_epsilon": 1e-6,
}

#: DiT-base (Li et al., "DiT: Self-supervised pre-training for Document Image Transformer",
#: ACM MM 2022): the BEiT architecture, 224 px pages, 16 px patches.
DIT_BASE = {
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "image_size": 224,
    "patch_size": 16,
    "use_absolute_position_embeddings": True,
    "use_relative_position_bias": False,
    "use_shared_relative_position_bias": False,
    "use_mask_token": True,
    "use_mean_pooling": True,
    "layer_scale_init_value": 0.1,
    "drop_path_rate": 0.1,
}

#: The kit's tiny T5: 4+4 layers of width 256, sized for 2 CPU cores.
T5_TINY = {
    "d_model": 256,
    "d_kv": 32,
    "d_ff": 1024,
    "num_layers": 4,
    "num_decoder_layers": 4,
    "num_heads": 8,
    "feed_forward_proj": "relu",
    "relative_attention_num_buckets": 32,
    "relative_attention_max_distance": 128,
    "dropout_rate": 0.1,
    "layer_norm_epsilon": 1e-6,
}

#: The kit's tiny DiT: one BEiT layer of width 96 on 224 px pages, 16 px patches.
DIT_TINY = {
    **DIT_BASE,
    "hidden_size": 96,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "intermediate_size": 192,
    "drop_path_rate": 0.0,
}


def base_vt5_config(vocab_size: int = 32128, **overrides: Any) -> VT5Config:
    """The real VT5-base shape: T5-base + DiT-base, 768-wide box tables, and `lm_head` a tensor
    of its own beside `shared`, as the public code holds it (`VT5Config.tie_lm_head`).

    Args:
        vocab_size: rows of the token embedding (32128 for the T5 tokenizer).
        **overrides: other `VT5Config` fields (e.g. `box_scale=1` for the public checkpoint,
            `tie_lm_head=True` for one shared output embedding).

    Returns:
        The configuration.
    """
    language = {**T5_BASE, "vocab_size": vocab_size}
    settings = {"tie_lm_head": False, **overrides}
    return VT5Config(language_config=language, visual_config=dict(DIT_BASE), **settings)


def tiny_vt5_config(vocab_size: int, **overrides: Any) -> VT5Config:
    """The kit's tiny VT5: T5 256-wide 4+4 layers, 1-layer 96-wide DiT, 32-wide box tables.

    The box tables are kept narrow (32 columns, then a Linear to 256) and the vocabulary small
    (our own SentencePiece model), so that LoRA on q/v plus the spatial embedding and the visual
    projection is a small fraction of the trainable weights.

    Args:
        vocab_size: rows of the token embedding (`len(tokenizer)`).
        **overrides: other `VT5Config` fields; `language_config` / `visual_config` entries given
            here update the tiny defaults.

    Returns:
        The configuration.
    """
    language = {**T5_TINY, **overrides.pop("language_config", {}), "vocab_size": vocab_size}
    visual = {**DIT_TINY, **overrides.pop("visual_config", {})}
    settings = {"spatial_embedding_dim": 32, "box_scale": 1000.0, "max_input_tokens": 512,
                "max_answer_tokens": 20, **overrides}
    return VT5Config(language_config=language, visual_config=visual, **settings)
