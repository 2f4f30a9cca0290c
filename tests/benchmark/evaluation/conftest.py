"""Fixtures: a generated `tiny` benchmark and a small VT5 checkpoint with a tokenizer trained on
its public corpus. Nothing is downloaded."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from benchmark.data import load_split
from benchmark.data.synthetic import generate_benchmark
from benchmark.model import save_checkpoint
from benchmark.model.random_init import random_tiny_model


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`pflkit data generate --scale tiny` output."""
    out = tmp_path_factory.mktemp("data") / "tiny"
    generate_benchmark(out, "tiny", seed=0, workers=1, progress=False)
    return out


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory: pytest.TempPathFactory, tiny_data: Path) -> Path:
    """A narrow random VT5 whose (meaningless) answers differ from page to page."""
    corpus = load_split(tiny_data / "public", "train")
    lines = []
    for record in corpus:
        lines.append(f"question: {record['question']}  context: ")
        lines.append(" ".join(record["ocr_tokens"]))
        lines.extend(record["answers"])
    model, processor = random_tiny_model(
        lines,
        tmp_path_factory.mktemp("tokenizer"),
        vocab_size=500,
        seed=0,
        language_config={"d_model": 64, "d_ff": 128, "num_layers": 1, "num_decoder_layers": 1,
                         "num_heads": 2},
        visual_config={"hidden_size": 32, "intermediate_size": 64},
        max_answer_tokens=6,
    )
    with torch.no_grad():  # sharp cross-attention: untrained answers then depend on the page
        for block in model.language_backbone.decoder.block:
            block.layer[1].EncDecAttention.q.weight.mul_(10.0)
            block.layer[1].EncDecAttention.o.weight.mul_(10.0)
    return save_checkpoint(model, processor, tmp_path_factory.mktemp("ckpt") / "tiny-random")

