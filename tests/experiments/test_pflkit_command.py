"""The experiment scripts' `pflkit` child process: a real `pflkit evaluate` on `tiny` data."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmark.data import load_split
from benchmark.evaluation import evaluate
from benchmark.model import load_model, load_processor
from experiments.pflkit_command import checkpoint_anls


def test_checkpoint_anls_is_the_in_process_evaluation(tiny_data: Path, tiny_base: Path) -> None:
    processor = load_processor(tiny_base)
    in_process = evaluate(
        load_model(tiny_base),
        processor,
        processor.encode_dataset(load_split(tiny_data, "val"), progress=False),
        progress=False,
    )
    assert checkpoint_anls(tiny_base, tiny_data, "val") == pytest.approx(in_process.anls)


def test_a_failed_scoring_names_the_checkpoint_split_and_cause(
    tiny_data: Path, tmp_path: Path
) -> None:
    missing = tmp_path / "no-checkpoint"
    with pytest.raises(RuntimeError, match=rf"{missing}: scoring failed \(test split\):\n.*"):
        checkpoint_anls(missing, tiny_data, "test")
