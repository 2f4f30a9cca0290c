"""The prediction and scoring loop shared by training, `pflkit evaluate` and the scoring worker.

What makes it fast on a CPU, compared with the public starter kit's loop (batches of 10 in file
order, every input padded to 512 tokens, `generate` with max length 20):

- every question is tokenised once (`VT5Processor.encode_dataset`, a cached `datasets.map`);
- batches are grouped by input length, so little padding is computed;
- the visual tokens of a page are computed once and reused by all its questions;
- `torch.inference_mode` and a greedy loop with a key/value cache that stops as soon as every
  answer has ended, with a bounded answer length (`benchmark.model.decoding`);
- on a CPU, as many batches side by side as torch has threads, one thread each: a tiny model's
  decoder steps are too small to gain from threads inside one operation.

Scores come from `benchmark.metrics` (ANLS of Biten et al., ICCV 2019).
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from benchmark.evaluation.result import EvaluationResult, Prediction
from benchmark.metrics import corpus_scores
from benchmark.model.batching import length_grouped_batches
from benchmark.model.device import autocast

DEFAULT_BATCH_SIZE = 64
#: threads decoding page images (PIL releases the GIL) beside the model's streams
IMAGE_LOADERS = 2


def default_cache_dir() -> Path:
    """Where tokenised splits are cached: `$PFLKIT_CACHE_DIR` or `~/.cache/pflkit/inputs`."""
    root = os.environ.get("PFLKIT_CACHE_DIR")
    return Path(root) if root else Path.home() / ".cache" / "pflkit" / "inputs"


class VisualTokenCache:
    """Visual tokens per page image, computed once and kept for the most recent pages.

    Questions of one page have inputs of nearly the same length, so length-grouped batches keep
    them together and a small cache serves them all. Page images are decoded by `loader`'s
    threads (PIL releases the GIL); `prefetch` starts the pages of a coming batch while the
    model computes the current one.

    Args:
        model: the VT5 model (its `embed_images`).
        processor: loads and normalises the images.
        capacity: pages kept.
        loader: the executor that decodes images (default: in the calling thread).
    """

    def __init__(
        self, model: Any, processor: Any, *, capacity: int = 256, loader: Executor | None = None
    ) -> None:
        self.model = model
        self.processor = processor
        self.capacity = capacity
        self.loader = loader
        self._tokens: OrderedDict[str, torch.Tensor] = OrderedDict()
        self._pixels: dict[str, Future[torch.Tensor]] = {}

    def prefetch(self, image_paths: Sequence[str]) -> None:
        """Start decoding the pages among these whose tokens are not kept (needs a loader)."""
        if self.loader is None:
            return
        for path in dict.fromkeys(image_paths):
            if path not in self._tokens and path not in self._pixels:
                self._pixels[path] = self.loader.submit(self.processor.load_image, path)

    def __call__(self, image_paths: Sequence[str]) -> torch.Tensor:
        """(len(image_paths), visual tokens, d_model) for the pages of a batch."""
        missing = [path for path in dict.fromkeys(image_paths) if path not in self._tokens]
        if missing:
            self.prefetch(missing)
            pixels = [
                self._pixels.pop(path).result() if path in self._pixels
                else self.processor.load_image(path)
                for path in missing
            ]  # fmt: skip
            device = next(self.model.parameters()).device
            tokens = self.model.embed_images(torch.stack(pixels).to(device))
            for path, page_tokens in zip(missing, tokens, strict=True):
                self._tokens[path] = page_tokens
        for path in image_paths:
            self._tokens.move_to_end(path)
        batch = torch.stack([self._tokens[path] for path in image_paths])
        while len(self._tokens) > max(self.capacity, len(image_paths)):
            self._tokens.popitem(last=False)
        return batch


def predict(
    model: Any,
    processor: Any,
    dataset: Any,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    max_new_tokens: int | None = None,
    max_batch_tokens: int | None = None,
    cache_dir: str | Path | None = None,
    progress: bool = True,
    precision: str = "fp32",
) -> list[str]:
    """Answer every question of a dataset, in dataset order.

    Args:
        model: a model of any family (:mod:`benchmark.model.families`), e.g. VT5.
        processor: its processor (:class:`~benchmark.model.families.DocumentProcessor`).
        dataset: a `datasets.Dataset` with the `load_split` columns (or already encoded).
        batch_size: most questions per batch.
        max_new_tokens: bound on answer tokens (default: the model's `max_answer_tokens`).
        max_batch_tokens: most padded text tokens per batch.
        cache_dir: where the tokenised split is cached (in-memory datasets).
        progress: show progress bars.
        precision: "fp32", or "bf16" for autocast (`benchmark.model.device`); the model runs
            on the device its parameters are on.

    Returns:
        One predicted answer per question.
    """
    encoded = processor.encode_dataset(dataset, cache_dir=cache_dir, progress=progress)
    # page features (VT5): the visual tokens of a page are computed once for its questions;
    # otherwise (Pix2Struct) each question's whole input, image included, is collated
    use_visual = processor.page_features and bool(model.config.use_visual)
    columns = list(processor.input_columns)
    table = encoded.select_columns(columns)
    pages = encoded["image_path"] if use_visual else []
    batches = length_grouped_batches(
        encoded["n_tokens"], batch_size, max_batch_tokens=max_batch_tokens
    )
    device = next(model.parameters()).device
    streams = torch.get_num_threads() if device.type == "cpu" else 1
    loader = ThreadPoolExecutor(IMAGE_LOADERS) if use_visual else None
    visual_tokens = VisualTokenCache(
        model, processor, capacity=max(256, 2 * batch_size), loader=loader
    )
    visual_lock = threading.Lock()

    def answer(number: int) -> tuple[list[int], list[str]]:
        indices = batches[number]
        rows = table[indices]
        features = [dict(zip(columns, values, strict=True))
                    for values in zip(*(rows[column] for column in columns), strict=True)]
        if not processor.page_features:
            return indices, _answer_whole(model, processor, features, device, precision,
                                          max_new_tokens)  # fmt: skip
        batch = {
            key: value.to(device)
            for key, value in processor.collate(features, with_images=False).items()
        }
        with torch.inference_mode(), autocast(device, precision):
            if use_visual:
                with visual_lock:
                    visual = visual_tokens([pages[index] for index in indices])
                    # the pages of the batch that follows the ones running now
                    if number + streams < len(batches):
                        visual_tokens.prefetch([pages[i] for i in batches[number + streams]])
            else:
                visual = None
            answer_ids = model.generate(**batch, visual_embeds=visual, max_new_tokens=max_new_tokens)
        return indices, processor.decode(answer_ids)

    predictions = [""] * len(encoded)
    was_training = model.training
    model.eval()
    try:
        with _one_thread_per_stream(streams), ThreadPoolExecutor(streams) as pool, tqdm(
            total=len(encoded), desc="Predicting", unit="q", disable=not progress
        ) as bar:
            # one stream runs in the calling thread
            answered = map if streams == 1 else pool.map
            for indices, texts in answered(answer, range(len(batches))):
                for index, text in zip(indices, texts, strict=True):
                    predictions[index] = text
                bar.update(len(indices))
    finally:
        model.train(was_training)
        if loader is not None:
            loader.shutdown(cancel_futures=True)
    return predictions


def _answer_whole(
    model: Any,
    processor: Any,
    features: list[dict[str, Any]],
    device: torch.device,
    precision: str,
    max_new_tokens: int | None,
) -> list[str]:
    """Answers of a batch whose every input is collated whole (no page features to reuse)."""
    batch = {
        key: value.to(device)
        for key, value in processor.collate(features, with_images=True).items()
    }
    with torch.inference_mode(), autocast(device, precision):
        answer_ids = model.generate(
            **batch, max_new_tokens=max_new_tokens or processor.max_answer_tokens
        )
    return processor.decode(answer_ids)


@contextmanager
def _one_thread_per_stream(streams: int) -> Iterator[None]:
    """Torch ops on one thread each while `streams` batches run side by side on the CPU.

    A tiny model's decoder steps are too small for torch's intra-op threads to pay off; whole
    batches in parallel, one core each, keep every core busy (measured in `make bench`).
    """
    threads = torch.get_num_threads()
    if streams > 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def score_predictions(dataset: Any, predictions: Sequence[str], seconds: float = 0.0) -> EvaluationResult:
    """Score predictions against a dataset's gold answers (ANLS and exact match).

    Args:
        dataset: `load_split` columns (`answers`, and `question_id`, `distribution`,
            `question_type` when present).
        predictions: one answer per question, in dataset order.
        seconds: prediction time, kept in the result.

    Returns:
        The evaluation result.
    """
    answers = [list(a) if not isinstance(a, str) else [a] for a in dataset["answers"]]
    anls, accuracy = corpus_scores(list(predictions), answers)
    n = len(answers)
    columns = set(dataset.column_names)
    question_ids = dataset["question_id"] if "question_id" in columns else list(range(n))
    distributions = dataset["distribution"] if "distribution" in columns else [""] * n
    question_types = dataset["question_type"] if "question_type" in columns else [""] * n
    scored = [
        Prediction(
            question_id=int(question_ids[i]),
            prediction=predictions[i],
            answers=answers[i],
            anls=float(anls[i]),
            accuracy=float(accuracy[i]),
            distribution=distributions[i] or "",
            question_type=question_types[i] or "",
        )
        for i in range(n)
    ]
    return EvaluationResult.from_predictions(scored, seconds=seconds)


def evaluate(
    model: Any,
    processor: Any,
    dataset: Any,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: bool = True,
    *,
    max_new_tokens: int | None = None,
    max_batch_tokens: int | None = None,
    cache_dir: str | Path | None = None,
    precision: str = "fp32",
) -> EvaluationResult:
    """Predict and score every question of a dataset.

    Args:
        model: a model of any family (:mod:`benchmark.model.families`), e.g. VT5.
        processor: its processor (:class:`~benchmark.model.families.DocumentProcessor`).
        dataset: a `datasets.Dataset` with the `load_split` columns.
        batch_size: most questions per batch.
        progress: show progress bars.
        max_new_tokens: bound on answer tokens (default: the model's `max_answer_tokens`).
        max_batch_tokens: most padded text tokens per batch.
        cache_dir: where the tokenised split is cached (in-memory datasets).
        precision: "fp32", or "bf16" for autocast.

    Returns:
        ANLS and accuracy overall, per distribution and per question type, with every prediction.
    """
    start = time.perf_counter()
    predictions = predict(
        model,
        processor,
        dataset,
        batch_size=batch_size,
        max_new_tokens=max_new_tokens,
        max_batch_tokens=max_batch_tokens,
        cache_dir=cache_dir,
        progress=progress,
        precision=precision,
    )
    return score_predictions(dataset, predictions, seconds=time.perf_counter() - start)
