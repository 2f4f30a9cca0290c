"""`VT5Processor`: the reference VT5 input construction, cacheable and batched.

Input of one question (as in the public VT5 code): the prompt `question: {q}  context: ` without
its EOS, every prompt token with the box `PROMPT_BOX`; then every OCR word tokenised on its own
(no EOS), its box repeated for each of its sub-tokens; the sequence cut to `max_input_tokens - 1`
and EOS (box 0, 0, 0, 0) appended. Boxes are integer bucket ids `int(coordinate * box_scale)`,
truncated from the coordinates as stored (float64, never rounded through float32 first).

What depends on the checkpoint is read from its `VT5Config`, never assumed: whether OCR words
and answers are lower-cased (`lowercase_text`, as the public code's dataset class did), the page
resize filter and normalisation (`image_resample`, `image_mean`, `image_std`), the box scale and
the lengths. Training, evaluation, the bench and the scoring worker all build their processor
with `VT5Processor.from_config` or `from_pretrained`, so they share these settings.

Tokenisation is split from collation so that a whole split can be tokenised once with
`datasets.map` (`encode_dataset`, cached on disk) and batches padded only to their own length.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmark.model.checkpoint_tokenizer import CheckpointTokenizer
from benchmark.model.configuration_vt5 import PROMPT_BOX, RESAMPLE_FILTERS, VT5Config

PROMPT_TEMPLATE = "question: {}  context: "
#: Columns `encode_dataset` adds: token ids, flat boxes (4 ints per token), token count.
TOKEN_COLUMNS = ("input_ids", "input_boxes", "n_tokens")
_ENCODING_VERSION = "vt5-inputs-2"


class VT5Processor(CheckpointTokenizer):
    """Tokenizer, input construction, image preprocessing and collation for VT5.

    Args:
        tokenizer: a transformers T5 tokenizer.
        box_scale: factor from [0, 1] box coordinates to bucket ids (`VT5Config.box_scale`).
        max_input_tokens: text tokens per question, EOS included.
        max_answer_tokens: bound on generated answer tokens, EOS included (generation only).
        max_label_tokens: cut training labels to this many tokens, EOS kept last (`None`, the
            default: labels are whole answers, as the public code's dataset gives them).
        max_2d_position_embeddings: bucket ids are clamped below this.
        use_visual: whether collation loads the page images.
        image_size: side of the square image given to the image encoder.
        image_mean: per-channel normalisation mean (DiT: 0.5).
        image_std: per-channel normalisation standard deviation (DiT: 0.5).
        lowercase_text: lower-case OCR words and answers before tokenising.
        image_resample: PIL filter name of the page resize (`RESAMPLE_FILTERS`).
    """

    #: the encoded columns `collate` reads (the family seam's `DocumentProcessor`)
    input_columns: tuple[str, ...] = ("input_ids", "input_boxes")
    #: a page's visual tokens are computed once for all its questions (`embed_images`)
    page_features = True

    def __init__(
        self,
        tokenizer: Any,
        *,
        box_scale: float = 1000.0,
        max_input_tokens: int = 512,
        max_answer_tokens: int = 20,
        max_label_tokens: int | None = None,
        max_2d_position_embeddings: int = 1024,
        use_visual: bool = True,
        image_size: int = 224,
        image_mean: Sequence[float] = (0.5, 0.5, 0.5),
        image_std: Sequence[float] = (0.5, 0.5, 0.5),
        lowercase_text: bool = False,
        image_resample: str = "bicubic",
    ) -> None:
        if max_input_tokens < 2:
            raise ValueError(f"max_input_tokens must be >= 2, got {max_input_tokens}")
        self.tokenizer = tokenizer
        self.box_scale = float(box_scale)
        self.max_input_tokens = int(max_input_tokens)
        self.max_answer_tokens = int(max_answer_tokens)
        if max_label_tokens is not None and max_label_tokens < 1:
            raise ValueError(f"max_label_tokens must be >= 1 or None, got {max_label_tokens}")
        self.max_label_tokens = max_label_tokens
        self.max_bucket = int(max_2d_position_embeddings) - 1
        self.use_visual = bool(use_visual)
        self.image_size = int(image_size)
        self.image_mean = np.asarray(image_mean, dtype=np.float32).reshape(3, 1, 1)
        self.image_std = np.asarray(image_std, dtype=np.float32).reshape(3, 1, 1)
        if image_resample not in RESAMPLE_FILTERS:
            raise ValueError(
                f"image_resample is {image_resample!r}; use one of {', '.join(RESAMPLE_FILTERS)}"
            )
        self.lowercase_text = bool(lowercase_text)
        self.image_resample = image_resample
        self.pad_token_id = tokenizer.pad_token_id
        self.eos_token_id = tokenizer.eos_token_id

    @classmethod
    def from_config(cls, tokenizer: Any, config: VT5Config) -> VT5Processor:
        """A processor matching a model configuration (box scale, lengths, image size)."""
        return cls(
            tokenizer,
            box_scale=config.box_scale,
            max_input_tokens=config.max_input_tokens,
            max_answer_tokens=config.max_answer_tokens,
            max_2d_position_embeddings=config.max_2d_position_embeddings,
            use_visual=config.use_visual,
            image_size=config.image_size,
            image_mean=config.image_mean,
            image_std=config.image_std,
            lowercase_text=config.lowercase_text,
            image_resample=config.image_resample,
        )

    @property
    def signature(self) -> str:
        """Hash of everything that determines the encoded inputs (cache key)."""
        state = {
            "version": _ENCODING_VERSION,
            "tokenizer": self.tokenizer.backend_tokenizer.to_str(),
            "box_scale": self.box_scale,
            "max_input_tokens": self.max_input_tokens,
            "max_bucket": self.max_bucket,
            "lowercase_text": self.lowercase_text,
            "prompt": PROMPT_TEMPLATE,
        }
        return hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()[:16]

    def encode_batch(
        self,
        questions: Sequence[str],
        words: Sequence[Sequence[str]],
        boxes: Sequence[Sequence[Sequence[float]]],
    ) -> dict[str, list]:
        """Token ids and box bucket ids of several questions (no padding).

        Args:
            questions: question strings.
            words: OCR words of each question's page.
            boxes: [x0, y0, x1, y1] in [0, 1] of every OCR word.

        Returns:
            `input_ids` (list of token id lists), `input_boxes` (flat lists, 4 ids per token)
            and `n_tokens`.
        """
        if self.lowercase_text:
            words = [[word.lower() for word in page] for page in words]
        prompts = self.tokenizer(
            [PROMPT_TEMPLATE.format(question) for question in questions],
            add_special_tokens=True,
        ).input_ids
        # a page's words recur in each of its questions: every distinct word is tokenised once
        distinct_words = list(dict.fromkeys(word for page in words for word in page))
        pieces_of_word = dict(zip(
            distinct_words,
            self.tokenizer(distinct_words, add_special_tokens=False).input_ids if distinct_words
            else [],
            strict=True,
        ))
        limit = self.max_input_tokens - 1
        all_ids, all_boxes, lengths = [], [], []
        for prompt, page_words, page_boxes in zip(prompts, words, boxes, strict=True):
            if len(page_words) != len(page_boxes):
                raise ValueError(
                    f"{len(page_words)} OCR words but {len(page_boxes)} boxes in one record"
                )
            ids = list(prompt[:-1])
            token_boxes = list(PROMPT_BOX) * len(ids)
            buckets = self.box_buckets(page_boxes)
            for word, bucket in zip(page_words, buckets, strict=True):
                if len(ids) >= limit:
                    break
                pieces = pieces_of_word[word]
                ids.extend(pieces)
                token_boxes.extend(bucket * len(pieces))
            ids = ids[:limit] + [self.eos_token_id]
            token_boxes = token_boxes[: 4 * limit] + [0, 0, 0, 0]
            all_ids.append(ids)
            all_boxes.append(token_boxes)
            lengths.append(len(ids))
        return {"input_ids": all_ids, "input_boxes": all_boxes, "n_tokens": lengths}

    def box_buckets(self, page_boxes: Sequence[Sequence[float]]) -> list[list[int]]:
        """Integer bucket ids of [0, 1] boxes: truncation of `coordinate * box_scale`."""
        if len(page_boxes) == 0:
            return []
        scaled = np.asarray(page_boxes, dtype=np.float64).reshape(-1, 4) * self.box_scale
        return np.clip(scaled.astype(np.int64), 0, self.max_bucket).tolist()

    def encode_answers(
        self, answers: Sequence[str], *, max_tokens: int | None = None
    ) -> list[list[int]]:
        """Label ids of answers (lower-cased when `lowercase_text`), EOS last.

        Args:
            answers: the answer strings.
            max_tokens: cut each to this many tokens, EOS kept last (default:
                `max_label_tokens`; `None` there too: whole answers, as the public code trains).

        Returns:
            One list of ids per answer.
        """
        if self.lowercase_text:
            answers = [answer.lower() for answer in answers]
        encoded = self.tokenizer(list(answers), add_special_tokens=True).input_ids
        limit = self.max_label_tokens if max_tokens is None else max_tokens
        if limit is None:
            return encoded
        return [ids if len(ids) <= limit else ids[: limit - 1] + [self.eos_token_id]
                for ids in encoded]

    def encode_dataset(
        self,
        dataset: Any,
        *,
        cache_dir: str | Path | None = None,
        batch_size: int = 256,
        progress: bool = True,
    ) -> Any:
        """Add the `TOKEN_COLUMNS` to a `datasets.Dataset` with the `load_split` columns.

        The result is cached: next to the dataset's own cache files when it has some, in
        `cache_dir` otherwise (in memory when neither exists). The cache key combines the
        dataset fingerprint with `signature`, so a different tokenizer or box scale re-encodes.

        Args:
            dataset: columns `question`, `ocr_tokens`, `ocr_boxes` at least.
            cache_dir: directory for the cache file of an in-memory dataset.
            batch_size: records per tokenizer call.
            progress: show a progress bar.

        Returns:
            The dataset with `input_ids`, `input_boxes` and `n_tokens` added.
        """
        if all(column in dataset.column_names for column in TOKEN_COLUMNS):
            return dataset
        fingerprint = hashlib.sha256(
            f"{dataset._fingerprint}-{self.signature}".encode()
        ).hexdigest()[:16]
        kwargs: dict[str, Any] = {}
        if not dataset.cache_files and cache_dir is not None:
            Path(cache_dir).mkdir(parents=True, exist_ok=True)
            kwargs["cache_file_name"] = str(Path(cache_dir) / f"vt5-inputs-{fingerprint}.arrow")
        # the types `datasets` would infer (it names input_ids int32), stated: inferring them
        # scans every value, a third of the time of a split's first tokenisation
        from datasets import Sequence, Value  # Sequence: List from datasets 4 on

        features = dataset.features.copy()
        features.update(
            input_ids=Sequence(Value("int32")),
            input_boxes=Sequence(Value("int64")),
            n_tokens=Value("int64"),
        )
        return dataset.map(
            lambda batch: self.encode_batch(
                batch["question"], batch["ocr_tokens"], batch["ocr_boxes"]
            ),
            batched=True,
            batch_size=batch_size,
            new_fingerprint=fingerprint,
            features=features,
            desc="Tokenising" if progress else None,
            **kwargs,
        )

    def load_image(self, image: str | Path | Any) -> torch.Tensor:
        """Page image (path or PIL image) as a normalised (3, size, size) float tensor."""
        from PIL import Image

        size = (self.image_size, self.image_size)
        resample = Image.Resampling(RESAMPLE_FILTERS[self.image_resample])
        if isinstance(image, (str, Path)):
            path = Path(image)
            if not path.is_file():
                raise FileNotFoundError(
                    f"{path}: page image not found (images live in images/ next to the .npy "
                    "split; pass the images directory to the reader if they are elsewhere)"
                )
            with Image.open(path) as opened:
                image = opened.convert("RGB").resize(size, resample)
        else:
            image = image.convert("RGB").resize(size, resample)
        pixels = np.asarray(image, dtype=np.float32).transpose(2, 0, 1) / 255.0
        return torch.from_numpy((pixels - self.image_mean) / self.image_std)

    def collate(
        self,
        features: Sequence[dict[str, Any]],
        *,
        with_labels: bool = False,
        with_images: bool | None = None,
        pad_to: int | None = None,
    ) -> dict[str, torch.Tensor]:
        """Pad encoded questions into a batch.

        Args:
            features: rows with `input_ids` and `input_boxes` (from `encode_batch` or
                `encode_dataset`), `answers` when `with_labels`, `image_path` when images load.
            with_labels: add `labels` from the first gold answer (-100 on padding).
            with_images: load `pixel_values`; default: when the processor uses the image.
            pad_to: pad to this many tokens instead of the longest row (reference loop: 512).

        Returns:
            `input_ids`, `boxes`, `attention_mask`, and `labels` / `pixel_values` on request.
        """
        lengths = [len(row["input_ids"]) for row in features]
        width = max(lengths) if pad_to is None else max(pad_to, max(lengths))
        batch = len(features)
        input_ids = np.full((batch, width), self.pad_token_id, dtype=np.int64)
        boxes = np.zeros((batch, width, 4), dtype=np.int64)
        mask = np.zeros((batch, width), dtype=np.int64)
        for row, (feature, length) in enumerate(zip(features, lengths, strict=True)):
            input_ids[row, :length] = feature["input_ids"]
            boxes[row, :length] = np.asarray(feature["input_boxes"], dtype=np.int64).reshape(-1, 4)
            mask[row, :length] = 1
        out = {
            "input_ids": torch.from_numpy(input_ids),
            "boxes": torch.from_numpy(boxes),
            "attention_mask": torch.from_numpy(mask),
        }
        if with_labels:
            out["labels"] = self.labels_tensor([_first_answer(row["answers"]) for row in features])
        if self.use_visual if with_images is None else with_images:
            out["pixel_values"] = torch.stack([self.load_image(row["image_path"]) for row in features])
        return out

    def labels_tensor(
        self, answers: Sequence[str], *, max_tokens: int | None = None
    ) -> torch.Tensor:
        """(batch, longest answer) label ids padded with -100 (`encode_answers`'s cut)."""
        encoded = self.encode_answers(answers, max_tokens=max_tokens)
        labels = torch.full((len(encoded), max(map(len, encoded))), -100, dtype=torch.long)
        for row, ids in enumerate(encoded):
            labels[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        return labels

    def __call__(
        self,
        questions: Sequence[str],
        words: Sequence[Sequence[str]],
        boxes: Sequence[Sequence[Sequence[float]]],
        *,
        images: Sequence[Any] | None = None,
        answers: Sequence[str] | None = None,
        pad_to: int | None = None,
    ) -> dict[str, torch.Tensor]:
        """Encode and collate raw questions in one call.

        Args:
            questions: question strings.
            words: OCR words per question.
            boxes: [0, 1] boxes per OCR word.
            images: page image paths or PIL images (required when the processor uses images).
            answers: target answers, one string per question, for `labels`.
            pad_to: pad to this many tokens.

        Returns:
            The model inputs (see `collate`).
        """
        encoded = self.encode_batch(questions, words, boxes)
        rows = [
            {"input_ids": ids, "input_boxes": flat}
            for ids, flat in zip(encoded["input_ids"], encoded["input_boxes"], strict=True)
        ]
        batch = self.collate(rows, with_images=False, pad_to=pad_to)
        if answers is not None:
            batch["labels"] = self.labels_tensor(list(answers))
        if self.use_visual:
            if images is None:
                raise ValueError("this processor uses the page image: pass images=")
            batch["pixel_values"] = torch.stack([self.load_image(image) for image in images])
        return batch

    def decode(self, token_ids: torch.Tensor | Sequence[Sequence[int]]) -> list[str]:
        """Answer strings of generated ids (special tokens dropped, whitespace stripped)."""
        if isinstance(token_ids, torch.Tensor):
            token_ids = token_ids.tolist()
        texts = self.tokenizer.batch_decode(token_ids, skip_special_tokens=True)
        return [text.strip() for text in texts]


def _first_answer(answers: str | Sequence[str]) -> str:
    """The first gold answer (records may hold one string or a list)."""
    if isinstance(answers, str):
        return answers
    return answers[0] if len(answers) else ""
