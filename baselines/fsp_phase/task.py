"""The pre-training phase's federated task: each client's pages under the denoising objectives.

The same engine as fine-tuning trains it (:class:`~baselines.core.task.FederatedTask`): the model is
the base with the added token rows (:mod:`baselines.fsp.vocabulary`), each client's data is its
distinct pages (:mod:`baselines.fsp.pages`), and the collate function draws, for every page of a
batch, one of the run's objectives and its masks (:mod:`baselines.fsp.objectives`). The draws come
from torch's generator, which the local trainer seeds per client and round, so a resumed run
draws the same examples. The phase has no validation questions; its checkpoint is saved without
the added rows, in the base architecture.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from baselines.core.task import FederatedTask
from baselines.engine.document_task import PageImages
from baselines.fsp.encoding import DenoisingEncoder
from baselines.fsp.objectives import OBJECTIVES
from baselines.fsp.pages import distinct_pages
from baselines.fsp.vocabulary import (
    DenoisingVocabulary,
    add_denoising_rows,
    drop_denoising_rows,
)


def build_pretraining_task(
    data_dir: str | Path,
    base: str | Path,
    *,
    objectives: Sequence[str],
    seed: int,
    info: dict[str, Any] | None = None,
) -> FederatedTask:
    """The denoising federation of a data directory's clients.

    Args:
        data_dir: a PFL-DocVQA data directory (``imdb_train_client_{k}.npy``).
        base: the checkpoint every party starts from.
        objectives: names of :data:`~baselines.fsp.objectives.OBJECTIVES` to draw from.
        seed: the run's seed (the added rows are initialised from it).
        info: description for the phase's ``submission.json``.

    Returns:
        The task.

    Raises:
        ValueError: for an unknown objective or a client without pages.
    """
    from benchmark.data.reader import count_clients, load_split
    from benchmark.model import (
        VT5Config,
        load_model,
        load_processor,
        resolve_checkpoint,
        save_checkpoint,
    )

    unknown = sorted(set(objectives) - set(OBJECTIVES))
    if unknown or not objectives:
        raise ValueError(f"objectives {list(objectives)}: choose from {sorted(OBJECTIVES)}")
    checkpoint = resolve_checkpoint(base)
    processor = load_processor(checkpoint)
    rows = VT5Config.from_pretrained(str(checkpoint)).t5_config.vocab_size
    vocabulary = DenoisingVocabulary(first_id=rows)
    pages = [
        distinct_pages(load_split(data_dir, "train", client))
        for client in range(count_clients(data_dir))
    ]
    for client, client_pages in enumerate(pages):
        if len(client_pages) == 0:
            raise ValueError(f"client {client} of {data_dir} has no page to pre-train on")

    def build_model() -> nn.Module:
        model = load_model(checkpoint)
        if add_denoising_rows(model, seed=seed) != vocabulary:
            raise ValueError(f"{checkpoint}: its embedding rows differ from its vocab_size {rows}")
        return model

    def save_model(model: nn.Module, directory: Path) -> None:
        save_checkpoint(drop_denoising_rows(model, rows), processor, directory)

    return FederatedTask(
        build_model=build_model,
        collate=DenoisingCollate(processor, vocabulary, tuple(objectives)),
        client_data=pages,
        evaluate=None,
        save_model=save_model,
        info={**(info or {}), "pages": [len(p) for p in pages], "added_tokens": vocabulary.size},
        length_column="n_words",
        prefetch=False,  # the collate draws its masking from torch's generator, as dropout does
    )


class DenoisingCollate:
    """Page rows -> a batch of denoising examples with labels.

    Args:
        processor: the checkpoint's ``VT5Processor``.
        vocabulary: the added tokens' ids.
        objectives: the objectives to draw from, uniformly per page.
    """

    def __init__(
        self, processor: Any, vocabulary: DenoisingVocabulary, objectives: tuple[str, ...]
    ) -> None:
        self.processor = processor
        self.encoder = DenoisingEncoder(processor, vocabulary)
        self.objectives = objectives
        self.images = PageImages(processor) if processor.use_visual else None

    def __call__(self, rows: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
        """The batch: ``input_ids``, ``boxes``, ``attention_mask``, ``labels`` (-100 padding),
        and ``pixel_values`` when the model reads the page image."""
        rng = random.Random(int(torch.randint(0, 2**62, (1,))))
        encoded = []
        for row in rows:
            objective = OBJECTIVES[rng.choice(self.objectives)]
            example = objective.example(row["ocr_tokens"], row["ocr_boxes"], rng)
            encoded.append(self.encoder.encode(example, objective.prompt))
        batch = self.processor.collate(encoded, with_labels=False, with_images=False)
        width = max(len(row["labels"]) for row in encoded)
        labels = torch.full((len(encoded), width), -100, dtype=torch.long)
        for index, row in enumerate(encoded):
            labels[index, : len(row["labels"])] = torch.tensor(row["labels"], dtype=torch.long)
        batch["labels"] = labels
        if self.images is not None:
            batch["pixel_values"] = self.images([row["image_path"] for row in rows])
        return batch
