"""Local training: every row once per epoch, length-grouped batches, seeded order."""

from __future__ import annotations

import pytest
import torch

from baselines.engine.local_training import LocalTrainer


def _trainer(batch_size: int, length_column: str | None) -> LocalTrainer:
    return LocalTrainer(
        lambda rows: {}, epochs=1, batch_size=batch_size, lr=1e-3, length_column=length_column
    )


@pytest.mark.parametrize("length_column", [None, "n_tokens"])
def test_an_epoch_covers_every_row_once_in_a_seeded_order(length_column) -> None:
    lengths = [
        int(x) for x in torch.randint(5, 500, (1000,), generator=torch.Generator().manual_seed(0))
    ]
    trainer = _trainer(16, length_column)
    lengths_arg = lengths if length_column else None
    batches = trainer._batches(1000, lengths_arg, torch.Generator().manual_seed(3))
    flat = [i for batch in batches for i in batch]
    assert sorted(flat) == list(range(1000))
    assert all(1 <= len(batch) <= 16 for batch in batches)
    again = trainer._batches(1000, lengths_arg, torch.Generator().manual_seed(3))
    other = trainer._batches(1000, lengths_arg, torch.Generator().manual_seed(4))
    assert again == batches and other != batches


def test_length_grouping_cuts_padding() -> None:
    lengths = [
        int(x) for x in torch.randint(5, 500, (1000,), generator=torch.Generator().manual_seed(0))
    ]

    def padded(batches):
        return sum(len(b) * max(lengths[i] for i in b) for b in batches)

    plain = _trainer(16, None)._batches(1000, None, torch.Generator().manual_seed(1))
    grouped = _trainer(16, "n_tokens")._batches(1000, lengths, torch.Generator().manual_seed(1))
    assert padded(grouped) < 0.7 * padded(plain)


def test_bad_local_options_are_refused() -> None:
    with pytest.raises(ValueError, match="must be >= 1"):
        LocalTrainer(lambda rows: {}, epochs=0, batch_size=4, lr=1e-3)
