"""A randomly initialised tiny VT5 with a SentencePiece tokenizer trained on given texts.

The starting point of pre-training (``benchmark.pretraining``), of the speed benchmark's
untrained model (``bench/bench.py``) and of the test suites' tiny checkpoints: each trains a
tokenizer on its corpus, sizes a ``tiny_vt5_config`` and initialises the weights.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from benchmark.model.tokenizer import SPIECE_NAME


def random_tiny_model(
    texts: Iterable[str],
    tokenizer_dir: str | Path,
    *,
    vocab_size: int,
    seed: int | None = None,
    hard_vocab_limit: bool = True,
    ship_spiece: bool = True,
    **config: Any,
) -> tuple[Any, Any]:
    """Train a tokenizer on ``texts`` and build a randomly initialised tiny VT5 for it.

    Args:
        texts: the tokenizer's training corpus.
        tokenizer_dir: where the SentencePiece model is written.
        vocab_size: pieces of the tokenizer.
        seed: torch seed of the initialisation (``None``: the current random state).
        hard_vocab_limit: SentencePiece's flag (``False``: fewer pieces when the corpus is
            small).
        ship_spiece: the processor saves the SentencePiece model with checkpoints.
        **config: ``tiny_vt5_config`` overrides (``language_config``, ``max_answer_tokens``, ...).

    Returns:
        ``(model, processor)``.
    """
    import torch

    from benchmark.model.modeling_vt5 import VT5ForConditionalGeneration
    from benchmark.model.presets import tiny_vt5_config
    from benchmark.model.processing_vt5 import VT5Processor
    from benchmark.model.tokenizer import load_tokenizer, train_spiece_model

    tokenizer_dir = Path(tokenizer_dir)
    train_spiece_model(texts, tokenizer_dir / SPIECE_NAME, vocab_size=vocab_size,
                       hard_vocab_limit=hard_vocab_limit)  # fmt: skip
    tokenizer = load_tokenizer(tokenizer_dir)
    vt5_config = tiny_vt5_config(len(tokenizer), **config)
    if seed is not None:
        torch.manual_seed(seed)
    model = VT5ForConditionalGeneration(vt5_config)
    processor = VT5Processor.from_config(tokenizer, vt5_config)
    if ship_spiece:
        processor = processor.with_spiece_model(tokenizer_dir)
    return model, processor
