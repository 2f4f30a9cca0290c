"""A random VT5 small enough to train and score in seconds, shared by the tests that train it."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any


def save_small_reference(
    rows: Iterable[dict[str, Any]], root: Path, *, vocab_size: int, max_answer_tokens: int,
    **config: Any,
) -> Path:
    """Save a random VT5 (T5 width 32, one encoder and one decoder layer) whose tokenizer is
    fitted on ``rows`` (question, answers and OCR), under ``root``; returns the checkpoint.
    ``config``: other ``VT5Config`` settings (``tie_lm_head=False``: the public code's head)."""
    from benchmark.model import save_checkpoint
    from benchmark.model.random_init import random_tiny_model

    texts = [" ".join([r["question"], *r["answers"], *r["ocr_tokens"]]) for r in rows]
    model, processor = random_tiny_model(
        texts, root / "tokenizer", vocab_size=vocab_size, seed=0, ship_spiece=False,
        language_config={"d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 1,
                         "num_decoder_layers": 1, "num_heads": 4},
        visual_config={"hidden_size": 16, "intermediate_size": 32, "num_attention_heads": 2,
                       "image_size": 32},
        spatial_embedding_dim=8, max_input_tokens=128, max_answer_tokens=max_answer_tokens,
        **config,
    )  # fmt: skip
    return save_checkpoint(model, processor, root / "model")
