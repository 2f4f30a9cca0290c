"""The federated task of the kit: a document model on a PFL-DocVQA data directory.

Builds a :class:`~baselines.core.task.FederatedTask` from a data directory (real release or generated
benchmark) and a base checkpoint of any model family (:mod:`benchmark.model.families`; VT5 is the
competition's): one tokenised dataset per client, the validation questions
(optionally the first N, for speed), a collate function with labels, evaluation through
``benchmark.evaluation`` and export through ``benchmark.model.save_checkpoint``. Everything is
checked before training starts: missing splits or checkpoint raise at once.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from baselines.core.task import FederatedTask


def build_task(
    data_dir: str | Path,
    base: str | Path = "base",
    *,
    val_limit: int | None = None,
    eval_batch_size: int = 32,
    progress: bool = True,
    clients: Sequence[int] | None = None,
    num_clients: int | None = None,
) -> FederatedTask:
    """The federation of a data directory with a base model, or one party's view of it.

    Args:
        data_dir: a PFL-DocVQA data directory (``imdb_train_client_{k}.npy`` and ``imdb_val.npy``).
        base: the pre-trained checkpoint every party starts from, of any family (``base``: the
            shipped VT5).
        val_limit: evaluate on the first N validation questions (``None``: all; 0: no evaluation).
        eval_batch_size: questions per evaluation batch.
        progress: progress bars while tokenising.
        clients: read only these clients' training files (a node of a deployed federation
            holds its own client's files only); the others' entries of ``client_data`` are
            ``None``. ``None``: every client.
        num_clients: K when ``clients`` is given and the directory holds only some clients'
            files (``None``: counted from the directory).

    Returns:
        The task.

    Raises:
        FileNotFoundError: for a missing split, page image or checkpoint.
        ValueError: for malformed data or checkpoint.
    """
    from benchmark.data.reader import count_clients, find_split, load_split
    from benchmark.model import (
        load_model,
        load_processor,
        read_checkpoint_config,
        resolve_checkpoint,
        save_checkpoint,
    )

    checkpoint = resolve_checkpoint(base)
    processor = load_processor(checkpoint)
    if num_clients is None:
        num_clients = count_clients(data_dir)
    held = range(num_clients) if clients is None else sorted(set(clients))
    for client in held:
        if not 0 <= client < num_clients:
            raise ValueError(f"client {client} is not in 0..{num_clients - 1}")
        find_split(data_dir, "train", client)
    evaluate = None
    val_size = 0
    if val_limit != 0:
        find_split(data_dir, "val")
        val = load_split(data_dir, "val")
        if val_limit is not None:
            val = val.select(range(min(val_limit, len(val))))
        val = processor.encode_dataset(val, progress=False)
        val_size = len(val)
        evaluate = _evaluator(processor, val, eval_batch_size)
    client_data: list[Any] = [None] * num_clients
    for client in held:
        data = load_split(data_dir, "train", client)
        if len(data) == 0:
            raise ValueError(f"client {client} of {data_dir} has no training question")
        client_data[client] = processor.encode_dataset(data, progress=False)

    # page features (VT5): decoded pages are kept across local epochs; a family that reads the
    # question inside the image (Pix2Struct) collates each row's whole input
    images = PageImages(processor) if processor.page_features and processor.use_visual else None
    whole_images = images is None and processor.use_visual

    def collate(rows):
        batch = processor.collate(rows, with_labels=True, with_images=whole_images)
        if images is not None:
            batch["pixel_values"] = images([row["image_path"] for row in rows])
        return batch

    def save_model(model: nn.Module, directory: Path) -> None:
        save_checkpoint(model, processor, directory)

    return FederatedTask(
        build_model=lambda: load_model(checkpoint),
        collate=collate,
        client_data=client_data,
        evaluate=evaluate,
        save_model=save_model,
        info={
            "data_dir": str(Path(data_dir).resolve()),
            "base": str(base),
            "family": read_checkpoint_config(checkpoint).model_type,
            "train_questions": [None if c is None else len(c) for c in client_data],
            "val_questions": val_size,
        },
        length_column="n_tokens",
    )


def _evaluator(processor: Any, val: Any, batch_size: int):
    """Validation ANLS and accuracy through ``benchmark.evaluation.evaluate``."""

    def evaluate(model: nn.Module) -> dict[str, float]:
        from benchmark.evaluation import evaluate as run_evaluation

        result = run_evaluation(model, processor, val, batch_size=batch_size, progress=False)
        return {"anls": float(result.anls), "accuracy": float(result.accuracy)}

    return evaluate


class PageImages:
    """Decoded page images kept in memory, so local epochs do not decode the same JPEG again.

    Args:
        processor: loads and normalises an image (``VT5Processor.load_image``).
        capacity: pages kept (least recently used dropped first); 512 pages of 224 px are
            about 300 MB.
    """

    def __init__(self, processor: Any, capacity: int = 512) -> None:
        self.processor = processor
        self.capacity = capacity
        self._pixels: OrderedDict[str, torch.Tensor] = OrderedDict()

    def __call__(self, paths: Sequence[str]) -> torch.Tensor:
        """(len(paths), 3, size, size) pixels of the pages."""
        for path in paths:
            if path in self._pixels:
                self._pixels.move_to_end(path)
            else:
                self._pixels[path] = self.processor.load_image(path)
        batch = torch.stack([self._pixels[path] for path in paths])
        while len(self._pixels) > max(self.capacity, len(paths)):
            self._pixels.popitem(last=False)
        return batch
