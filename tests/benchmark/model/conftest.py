"""Fixtures for the VT5 tests: a SentencePiece model trained here, real-layout records, tiny VT5.

Records have the `load_split` columns and their page images are real JPEG files drawn with the
OCR words at their boxes. Nothing is downloaded.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch
from PIL import Image, ImageDraw

from benchmark.model import (
    VT5ForConditionalGeneration,
    VT5Processor,
    load_tokenizer,
    tiny_vt5_config,
    train_spiece_model,
)

COMPANIES = ["Acme GmbH", "Nordwind Ltd", "Vega Trading SA", "Kappa Industries Inc"]
KEYS = [
    ("Invoice number", "What is the invoice number?"),
    ("Invoice date", "What is the invoice date?"),
    ("Total amount", "What is the total amount?"),
    ("Due date", "When is the payment due?"),
]


def _value(rng: random.Random, key: str) -> str:
    if "date" in key.lower():
        return f"{rng.randint(1, 28):02d}.{rng.randint(1, 12):02d}.20{rng.randint(10, 29)}"
    if "amount" in key.lower():
        return f"{rng.randint(10, 99999)}.{rng.randint(0, 99):02d} EUR"
    return f"INV-{rng.randint(1000, 99999)}"


def make_records(image_dir: Path, n_pages: int = 6, seed: int = 0) -> list[dict]:
    """Records in the `load_split` column layout, 4 questions per page, with page images."""
    rng = random.Random(seed)
    image_dir.mkdir(parents=True, exist_ok=True)
    records = []
    for page in range(n_pages):
        words, boxes, values = [], [], {}
        company = rng.choice(COMPANIES)
        lines = [company.split(), ["Street", str(rng.randint(1, 200))]]
        for key, _ in KEYS:
            values[key] = _value(rng, key)
            lines.append(key.split() + [":"] + values[key].split())
        filler = ["Payment", "terms", "net", str(rng.randint(10, 60)), "days"] * rng.randint(1, 8)
        lines.append(filler)
        row = 0
        for line in lines:
            x = 0.05
            for word in line:
                width = 0.012 * len(word) + 0.01
                if x + width > 0.95:
                    row, x = row + 1, 0.05
                boxes.append([x, 0.05 + 0.05 * row, x + width, 0.08 + 0.05 * row])
                words.append(word)
                x += width + 0.01
            row += 1
        image_path = image_dir / f"page_{page}.jpg"
        image = Image.new("RGB", (400, 520), "white")
        draw = ImageDraw.Draw(image)
        for word, (x0, y0, _, _) in zip(words, boxes, strict=True):
            draw.text((x0 * 400, y0 * 520), word, fill="black")
        image.save(image_path, quality=85)
        for number, (key, question) in enumerate(KEYS):
            records.append(
                {
                    "question_id": len(records),
                    "question": question,
                    "answers": [values[key]],
                    "ocr_tokens": words,
                    "ocr_boxes": boxes,
                    "image_path": str(image_path),
                    "provider": company,
                    "client": -1,
                    "distribution": "in" if page % 2 == 0 else "out",
                    "question_type": key.lower().replace(" ", "_"),
                    "document_id": f"doc{page}-{number}",
                }
            )
    return records


def corpus_lines(records: list[dict]) -> list[str]:
    """Sentences for tokenizer training: prompts, OCR lines and answers."""
    lines = []
    for record in records:
        lines.append(f"question: {record['question']}  context: ")
        lines.append(" ".join(record["ocr_tokens"]))
        lines.extend(record["answers"])
    lines.append("abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789 .,:;-/()€$%")
    return lines


@pytest.fixture(scope="session")
def records(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """24 questions on 6 invoice pages with real JPEG images."""
    return make_records(tmp_path_factory.mktemp("pages"))


@pytest.fixture(scope="session")
def spiece_dir(tmp_path_factory: pytest.TempPathFactory, records: list[dict]) -> Path:
    """A directory holding a T5-style `spiece.model` trained on the records."""
    directory = tmp_path_factory.mktemp("tokenizer")
    train_spiece_model(corpus_lines(records) * 20, directory / "spiece.model", vocab_size=128)
    return directory


@pytest.fixture(scope="session")
def processor(spiece_dir: Path) -> VT5Processor:
    """Processor of the tiny model."""
    tokenizer = load_tokenizer(spiece_dir)
    config = tiny_vt5_config(len(tokenizer))
    return VT5Processor.from_config(tokenizer, config).with_spiece_model(spiece_dir)


@pytest.fixture(scope="session")
def tiny_model(processor: VT5Processor) -> VT5ForConditionalGeneration:
    """A randomly initialised tiny VT5 in eval mode."""
    torch.manual_seed(0)
    model = VT5ForConditionalGeneration(tiny_vt5_config(len(processor.tokenizer)))
    return model.eval()
