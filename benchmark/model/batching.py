"""Batches of questions grouped by input length, so that little padding is computed."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def length_grouped_batches(
    lengths: Sequence[int],
    batch_size: int,
    *,
    max_batch_tokens: int | None = None,
    seed: int | None = None,
) -> list[list[int]]:
    """Split row indices into batches of similar length.

    Rows are sorted by length (longest first, stable), then cut into batches of at most
    `batch_size` rows and, when given, at most `max_batch_tokens` padded tokens. With `seed`
    the order of the batches is shuffled (for training); without it, longest batches come first.

    Args:
        lengths: input length of every row.
        batch_size: most rows per batch.
        max_batch_tokens: most `rows x longest length` per batch.
        seed: shuffle the batch order with this seed.

    Returns:
        Lists of row indices; every row appears exactly once.

    Raises:
        ValueError: if `batch_size` is not positive.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    order = np.argsort(-np.asarray(lengths, dtype=np.int64), kind="stable")
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order.tolist():
        longest = lengths[current[0]] if current else lengths[index]
        too_many_tokens = (
            max_batch_tokens is not None and current and longest * (len(current) + 1) > max_batch_tokens
        )
        if len(current) == batch_size or too_many_tokens:
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    if seed is not None:
        rng = np.random.default_rng(seed)
        batches = [batches[i] for i in rng.permutation(len(batches))]
    return batches
