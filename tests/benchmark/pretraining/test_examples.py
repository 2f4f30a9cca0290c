"""Pre-training examples: cropping around the answer and the reading task."""

from __future__ import annotations

import random

import pytest

from benchmark.pretraining.examples import (
    answer_span,
    crop_window,
    make_example,
    move_layout,
    qa_example,
    reading_example,
)


def _record(words: list[str], answer: str) -> dict:
    boxes = [[i / 100, 0.1, (i + 1) / 100, 0.12] for i in range(len(words))]
    return {"question": "What is the order number?", "answers": [answer], "ocr_tokens": words,
            "ocr_boxes": boxes, "image_path": "page.jpg"}


def test_answer_span_finds_multi_word_answers() -> None:
    words = "Order No. PO-1234 Date 01.02.2024 Total 1 234.50 EUR".split()
    assert answer_span(words, "PO-1234") == (2, 3)
    assert answer_span(words, "1 234.50 EUR") == (6, 9)
    assert answer_span(words, "missing") is None
    assert answer_span(words, "") is None


@pytest.mark.parametrize("window", [1, 3, 8, 20])
def test_crop_window_keeps_the_answer_and_respects_the_size(window: int) -> None:
    rng = random.Random(0)
    for _ in range(200):
        n_words = rng.randint(1, 60)
        start = rng.randrange(n_words)
        span = (start, min(n_words, start + rng.randint(1, 4)))
        begin, end = crop_window(n_words, span, window, rng)
        assert 0 <= begin <= span[0] and span[1] <= end <= n_words
        assert end - begin <= max(window, span[1] - span[0])


def test_crop_window_moves_the_answer_around() -> None:
    rng = random.Random(1)
    offsets = {crop_window(100, (50, 51), 10, rng)[0] for _ in range(200)}
    assert len(offsets) == 10  # every position of the answer inside the window occurs


def test_qa_example_crops_around_the_answer() -> None:
    words = [f"w{i}" for i in range(40)] + ["PO-99"] + [f"v{i}" for i in range(40)]
    example = qa_example(_record(words, "PO-99"), 8, random.Random(0))
    assert "PO-99" in example.words and len(example.words) == 8
    assert len(example.boxes) == len(example.words)
    assert example.answer == "PO-99"


def test_reading_example_answers_with_the_words_after_a_unique_word() -> None:
    words = "the the Invoice 2024-001 due 12.03.2024 the".split()
    rng = random.Random(3)
    for _ in range(50):
        example = reading_example(_record(words, "x"), None, rng)
        anchor = next(w for w in words if example.question.endswith(w + "?") or
                      example.question.endswith(w))
        position = words.index(anchor)
        assert words.count(anchor) == 1
        expected = words[position + 1 : position + 1 + len(example.answer.split())]
        assert example.answer.split() == expected


def test_reading_example_needs_a_unique_word() -> None:
    assert reading_example(_record(["a", "a", "a"], "a"), None, random.Random(0)) is None
    # make_example falls back to the QA pair
    example = make_example(_record(["a", "a", "a"], "a"), None, 1.0, random.Random(0))
    assert example.question == "What is the order number?"


def test_move_layout_keeps_boxes_valid_and_their_arrangement() -> None:
    rng = random.Random(3)
    boxes = [[0.0, 0.0, 0.1, 0.05], [0.5, 0.5, 0.9, 0.55], [0.95, 0.9, 1.0, 1.0]]
    moved_pages = [move_layout(boxes, rng) for _ in range(300)]
    for moved in moved_pages:
        for x0, y0, x1, y1 in moved:
            assert 0.0 <= x0 <= x1 <= 1.0 and 0.0 <= y0 <= y1 <= 1.0
        # one affine map per page: left-to-right and top-to-bottom order is kept
        assert moved[0][0] < moved[1][0] < moved[2][0]
        assert moved[0][1] < moved[1][1] < moved[2][1]
    firsts = {round(moved[1][0], 2) for moved in moved_pages}
    assert len(firsts) > 30  # the same word lands in many places


def test_make_example_moves_the_given_share_of_layouts() -> None:
    record = _record("Order No. PO-1234 Date 01.02.2024".split(), "PO-1234")
    rng = random.Random(0)
    moved = sum(make_example(record, None, 0.0, rng, moved_share=0.75).boxes != record["ocr_boxes"]
                for _ in range(2000))
    assert 0.70 < moved / 2000 < 0.80
    assert all(make_example(record, None, 0.0, rng).boxes == record["ocr_boxes"]
               for _ in range(50))
