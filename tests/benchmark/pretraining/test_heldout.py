"""The held-out questions of the pre-training run, as is and with moved layouts."""

from __future__ import annotations

from pathlib import Path

from benchmark.data import load_split
from benchmark.metrics import normalise_answer
from benchmark.pretraining.heldout import (
    is_value_answer,
    unseen_value_questions,
    with_moved_layouts,
)


def test_heldout_questions_have_values_never_seen_in_training(tiny_benchmark: Path) -> None:
    training = load_split(tiny_benchmark / "public", "train")
    validation = load_split(tiny_benchmark / "public", "val")
    questions = unseen_value_questions(validation, training, limit=50, seed=0)
    seen = {normalise_answer(a) for answers in training["answers"] for a in answers}
    assert len(questions) > 0
    for answers in questions["answers"]:
        assert is_value_answer(answers[0])
        assert not any(normalise_answer(a) in seen for a in answers)


def test_moved_layouts_change_only_the_boxes_and_are_reproducible(tiny_benchmark: Path) -> None:
    training = load_split(tiny_benchmark / "public", "train")
    validation = load_split(tiny_benchmark / "public", "val")
    questions = unseen_value_questions(validation, training, limit=20, seed=0)
    moved = with_moved_layouts(questions, seed=0)
    assert moved["ocr_boxes"] == with_moved_layouts(questions, seed=0)["ocr_boxes"]
    assert moved["ocr_boxes"] != questions["ocr_boxes"]
    for column in ("question", "answers", "ocr_tokens", "image_path"):
        assert moved[column] == questions[column]
    for page in moved["ocr_boxes"]:
        for x0, y0, x1, y1 in page:
            assert 0.0 <= x0 <= x1 <= 1.0 and 0.0 <= y0 <= y1 <= 1.0
