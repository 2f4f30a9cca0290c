"""Randomly initialised models: a tiny VT5 with a tokenizer trained on given texts, and any
family's named shape with the shipped tokenizer.

The tiny one is the starting point of pre-training (``benchmark.pretraining``), of the speed
benchmark's untrained model (``bench/bench.py``) and of the test suites' tiny checkpoints: each
trains a tokenizer on its corpus, sizes a ``tiny_vt5_config`` and initialises the weights.
:func:`init_checkpoint` (``pflkit model init``) writes a family's real shape (VT5-base, Pix2Struct-base)
without a hub, so every real-size check runs on weights the kit makes itself.
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


def init_checkpoint(shape: str, out: str | Path, *, seed: int = 0, family: str = "vt5") -> Path:
    """Write a randomly initialised model of a family's named shape with the shipped tokenizer.

    Args:
        shape: one of the family's ``shapes`` (``tiny``, ``base``; VT5 also ``vt5-base``).
        out: the checkpoint directory to write (must not exist).
        seed: torch seed of the initialisation.
        family: the model family (:mod:`benchmark.model.families`).

    Returns:
        The written directory.

    Raises:
        ValueError: for an unknown family or shape.
        FileExistsError: if ``out`` exists.
    """
    import torch

    from benchmark.model.families import family_named
    from benchmark.model.loading import save_checkpoint
    from benchmark.shipped import BASE_MODEL_DIR

    family_class = family_named(family)
    if shape not in family_class.shapes:
        raise ValueError(
            f"unknown {family_class.title} shape {shape!r}; choose one of "
            f"{', '.join(family_class.shapes)}"
        )
    out = Path(out)
    if out.exists():
        raise FileExistsError(f"{out}: already exists; choose a new directory")
    torch.manual_seed(seed)
    model, processor = family_class.random_model(shape, BASE_MODEL_DIR)
    return save_checkpoint(model.eval(), processor, out)
