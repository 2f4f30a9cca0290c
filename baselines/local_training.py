"""The local optimisation loop a client runs each round (AdamW, rebuilt per round)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

if TYPE_CHECKING:
    from datasets import Dataset

Collate = Callable[[Sequence[dict[str, Any]]], dict[str, torch.Tensor]]


@dataclass
class TrainStats:
    """What one call of local training did.

    Attributes:
        steps: optimiser steps.
        examples: examples seen (epochs x dataset size).
        loss: mean training loss over all steps.
        seconds: wall time.
    """

    steps: int
    examples: int
    loss: float
    seconds: float

    def as_dict(self) -> dict[str, float]:
        """Plain dictionary for logs."""
        return {key: float(value) for key, value in asdict(self).items()}


class LocalTrainer:
    """AdamW over the trainable parameters for a number of local epochs.

    The optimiser is built anew at every call, as in the competition's reference code, so no
    optimiser state survives between rounds or leaks between clients.

    Args:
        collate: turns a list of dataset rows into model inputs with ``labels``.
        epochs: local epochs per round.
        batch_size: examples per step.
        lr: AdamW learning rate.
        weight_decay: AdamW weight decay.
        max_grad_norm: clip the gradient norm to this value (``None``: no clipping).
        progress: show a progress bar per client.
        length_column: a dataset column with each row's input length; when given, every shuffled
            chunk of 32 batches is sorted by length before it is cut into batches, so batches
            hold rows of similar length and little padding is computed.
    """

    def __init__(
        self,
        collate: Collate,
        *,
        epochs: int,
        batch_size: int,
        lr: float,
        weight_decay: float = 0.0,
        max_grad_norm: float | None = None,
        progress: bool = False,
        length_column: str | None = None,
    ) -> None:
        if epochs < 1 or batch_size < 1 or not lr > 0:
            raise ValueError(
                f"local epochs ({epochs}) and batch size ({batch_size}) must be >= 1 and lr ({lr}) > 0"
            )
        self.collate = collate
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.max_grad_norm = max_grad_norm
        self.progress = progress
        self.length_column = length_column
        self.description = ""

    def train(self, model: nn.Module, dataset: Dataset, *, seed: int) -> TrainStats:
        """Train ``model`` in place on ``dataset``.

        Args:
            model: the model; only parameters with ``requires_grad`` are optimised.
            dataset: rows to train on.
            seed: seeds the shuffling and dropout, so a run is reproducible.

        Returns:
            Statistics of the call.
        """
        from tqdm.auto import tqdm

        start = time.perf_counter()
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=self.lr, weight_decay=self.weight_decay)
        generator = torch.Generator().manual_seed(seed)
        torch.manual_seed(seed)
        n = len(dataset)
        steps_per_epoch = math.ceil(n / self.batch_size)
        model.train()
        total_loss = 0.0
        steps = 0
        bar = tqdm(
            total=steps_per_epoch * self.epochs,
            desc=self.description or "local training",
            leave=False,
            disable=not self.progress,
            unit="step",
        )
        lengths = dataset[self.length_column] if self.length_column else None
        for _ in range(self.epochs):
            for indices in self._batches(n, lengths, generator):
                batch = self.collate(list(dataset.select(indices)))
                loss = model(**batch).loss
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if self.max_grad_norm is not None:
                    torch.nn.utils.clip_grad_norm_(params, self.max_grad_norm)
                optimizer.step()
                total_loss += float(loss.detach())
                steps += 1
                bar.update(1)
                bar.set_postfix(loss=f"{float(loss.detach()):.3f}")
        bar.close()
        model.eval()
        return TrainStats(
            steps=steps,
            examples=n * self.epochs,
            loss=total_loss / max(steps, 1),
            seconds=time.perf_counter() - start,
        )

    def _batches(
        self, n: int, lengths: Sequence[int] | None, generator: torch.Generator
    ) -> list[list[int]]:
        """One epoch of shuffled batches (length-grouped within chunks when lengths are known)."""
        order = torch.randperm(n, generator=generator).tolist()
        size = self.batch_size
        if lengths is None:
            return [order[begin : begin + size] for begin in range(0, n, size)]
        chunk = size * 32
        batches: list[list[int]] = []
        for begin in range(0, n, chunk):
            part = sorted(order[begin : begin + chunk], key=lambda i: -lengths[i])
            batches.extend(part[b : b + size] for b in range(0, len(part), size))
        permutation = torch.randperm(len(batches), generator=generator).tolist()
        return [batches[i] for i in permutation]
