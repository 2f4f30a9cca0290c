"""Pix2Struct's inputs: the question rendered as a header above the page, cut into patches.

Pix2Struct reads no OCR: the question is drawn in a font above the page image (as the public
DocVQA checkpoint was trained) and the whole picture is resized, keeping its aspect ratio, to at
most ``max_patches`` patches of 16 x 16 pixels (transformers' ``Pix2StructImageProcessorPil``).
The font is matplotlib's DejaVu Sans, shipped with a dependency of the kit (the public code
downloads Arial from a hub, which the kit never does). Answers are the kit's own T5 tokenizer's.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import torch

from benchmark.model.checkpoint_tokenizer import CheckpointTokenizer
from benchmark.model.families.page_image import open_page


def header_font() -> Path:
    """DejaVu Sans, the font matplotlib ships (the header's font on every machine)."""
    import matplotlib

    return Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf"


class Pix2StructProcessor(CheckpointTokenizer):
    """Header rendering, patches, labels and decoding for Pix2Struct.

    Args:
        tokenizer: the T5 tokenizer of the answers.
        max_patches: patches of the rendered page (the public DocVQA checkpoint: 2,048).
        max_answer_tokens: bound on generated answer tokens, EOS included.
    """

    input_columns: tuple[str, ...] = ("question", "image_path")
    page_features = False
    use_visual = True

    def __init__(self, tokenizer: Any, *, max_patches: int, max_answer_tokens: int = 20) -> None:
        if max_patches < 1:
            raise ValueError(f"max_patches must be >= 1, got {max_patches}")
        self.tokenizer = tokenizer
        self.max_patches = int(max_patches)
        self.max_answer_tokens = int(max_answer_tokens)
        self._source_dir: Path | None = None

    @classmethod
    def from_config(cls, tokenizer: Any, config: Any) -> Pix2StructProcessor:
        """The processor of a model configuration (its ``max_patches``, ``max_answer_tokens``)."""
        return cls(tokenizer, max_patches=config.max_patches,
                   max_answer_tokens=config.max_answer_tokens)  # fmt: skip

    @cached_property
    def image_processor(self) -> Any:
        """transformers' patch extractor (no header: the kit draws it, :meth:`render`)."""
        from transformers.models.pix2struct.image_processing_pil_pix2struct import (
            Pix2StructImageProcessorPil,
        )

        return Pix2StructImageProcessorPil(is_vqa=False, max_patches=self.max_patches)

    def encode_dataset(self, dataset: Any, *, cache_dir: str | Path | None = None,
                       progress: bool = True) -> Any:
        """The dataset with ``n_tokens`` (the patches every question's input has)."""
        if "n_tokens" in dataset.column_names:
            return dataset
        return dataset.add_column("n_tokens", [self.max_patches] * len(dataset))

    def load_image(self, image: Any) -> Any:
        """A page (path or PIL image) as an RGB PIL image."""
        return open_page(image)

    def render(self, image: Any, question: str) -> Any:
        """The page with the question drawn above it, both at the page's width."""
        from PIL import Image
        from transformers.models.pix2struct.image_processing_pil_pix2struct import render_text

        page = self.load_image(image)
        header = render_text(question, font_path=str(header_font()))
        width = max(header.width, page.width)
        page_height = round(page.height * width / page.width)
        header_height = round(header.height * width / header.width)
        canvas = Image.new("RGB", (width, page_height + header_height), "white")
        canvas.paste(header.resize((width, header_height)), (0, 0))
        canvas.paste(page.resize((width, page_height)), (0, header_height))
        return canvas

    def collate(self, features: Sequence[dict[str, Any]], *, with_labels: bool = False,
                with_images: bool | None = None) -> dict[str, torch.Tensor]:
        """``flattened_patches`` and ``attention_mask`` of each question's rendered page, and
        ``labels`` (the first gold answer, -100 on padding) on request."""
        pictures = [self.render(row["image_path"], row["question"]) for row in features]
        batch = dict(self.image_processor(images=pictures, return_tensors="pt"))
        if with_labels:
            batch["labels"] = self.labels_tensor([_first_answer(row["answers"]) for row in features])
        return batch

    def labels_tensor(self, answers: Sequence[str]) -> torch.Tensor:
        """(batch, longest answer + EOS) label ids padded with -100."""
        encoded = [self.tokenizer(answer, add_special_tokens=True)["input_ids"] for answer in answers]
        labels = torch.full((len(encoded), max(map(len, encoded))), -100, dtype=torch.long)
        for row, ids in enumerate(encoded):
            labels[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        return labels

    def decode(self, token_ids: Any) -> list[str]:
        """Answer strings of generated ids (special tokens dropped, whitespace stripped)."""
        if isinstance(token_ids, torch.Tensor):
            token_ids = token_ids.tolist()
        return [text.strip() for text in self.tokenizer.batch_decode(token_ids, skip_special_tokens=True)]


def _first_answer(answers: str | Sequence[str]) -> str:
    """The first gold answer (records hold one string or a list)."""
    return answers if isinstance(answers, str) else (answers[0] if answers else "")
