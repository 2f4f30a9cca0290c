"""Fixtures of the engine tests: a generated `tiny` benchmark and a tiny random VT5 checkpoint.

Both are real artefacts in the kit's formats (imdb files + images, a safetensors checkpoint with
its SentencePiece tokenizer), built once per session; nothing is downloaded.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch


@pytest.fixture(autouse=True, scope="package")
def _one_thread():
    """One torch thread: tiny models run many times faster on a shared 2-core machine."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated `tiny` benchmark directory (10 clients)."""
    from benchmark.data.synthetic.benchmark import generate_benchmark

    out = tmp_path_factory.mktemp("data") / "tiny"
    generate_benchmark(out, "tiny", public_documents=0, workers=1, progress=False)
    return out


@pytest.fixture(scope="session")
def tiny_base(tmp_path_factory: pytest.TempPathFactory, tiny_data: Path) -> Path:
    """A randomly initialised VT5 small enough for a round in seconds, saved as a checkpoint.

    T5 width 32 with 1+1 layers, a 16-wide one-layer DiT on 32 px pages, 8-wide box tables and a
    300-piece tokenizer trained on the tiny benchmark's client texts.
    """
    from benchmark.data.reader import count_clients, load_split
    from benchmark.model import save_checkpoint
    from benchmark.model.random_init import random_tiny_model

    root = tmp_path_factory.mktemp("base")
    texts: list[str] = []
    for client in range(count_clients(tiny_data)):
        for row in load_split(tiny_data, "train", client):
            texts.extend([row["question"], *row["answers"], " ".join(row["ocr_tokens"])])
    model, processor = random_tiny_model(
        texts,
        root / "tokenizer",
        vocab_size=300,
        language_config={"d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 1,
                         "num_decoder_layers": 1, "num_heads": 4},
        visual_config={"hidden_size": 16, "intermediate_size": 32, "num_attention_heads": 2,
                       "image_size": 32},
        spatial_embedding_dim=8,
        max_input_tokens=128,
        max_answer_tokens=8,
    )
    return save_checkpoint(model, processor, root / "checkpoint")
