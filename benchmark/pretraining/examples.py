"""Turning public-corpus records into pre-training examples.

Three kinds of example, all answered by copying words of the page:

- transcription, "read the text": the page is cut to one to four consecutive words and the
  answer is all of them. The question says nothing about the answer, so the only way to lower
  the loss is to copy; this is where the copy mechanism forms;
- reading, "what follows X?": the answer is the one to three words after a word X that occurs
  once on the page (find, then copy);
- the record's own question, with the page cropped to a window of words around the answer
  (the curriculum's short contexts).

Every kind may have its page *moved*: all boxes scaled and shifted by one random affine map
inside the page (:func:`move_layout`). Public documents of one kind share a template, so without
it the model learns where an answer sits rather than which label it follows, and does not
transfer to other layouts (measured: held-out value ANLS 0.69 fell to 0.21 with boxes moved).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

TRANSCRIPTION_QUESTION = "read the text"
MAX_TRANSCRIBED_WORDS = 4

READING_TEMPLATES = (
    "what follows {}?",
    "which words come after {}?",
    "read the text after {}",
)


@dataclass(frozen=True)
class Example:
    """One training example: a question, its page (possibly cropped) and the target answer."""

    question: str
    words: list[str]
    boxes: list[list[float]]
    answer: str
    image_path: str


def answer_span(words: Sequence[str], answer: str) -> tuple[int, int] | None:
    """First word span `[start, end)` of `words` that spells `answer` (space-joined), if any."""
    target = answer.split()
    if not target:
        return None
    width = len(target)
    for start in range(len(words) - width + 1):
        if list(words[start : start + width]) == target:
            return start, start + width
    return None


def crop_window(
    n_words: int, span: tuple[int, int] | None, window: int | None, rng: random.Random
) -> tuple[int, int]:
    """Word range `[start, end)` of at most `window` words that contains `span`.

    The span sits at a random offset inside the window, so the model cannot learn where the
    answer is from its position. Without a span (or without a window) the page is kept whole,
    or its first `window` words.
    """
    if window is None or n_words <= window:
        return 0, n_words
    if span is None:
        return 0, window
    span_start, span_end = span
    width = max(window, span_end - span_start)
    earliest = max(0, span_end - width)
    latest = min(span_start, n_words - width)
    start = rng.randint(earliest, max(earliest, latest))
    return start, min(n_words, start + width)


def qa_example(record: dict, window: int | None, rng: random.Random) -> Example:
    """The record's own question on a page cropped to `window` words around its answer."""
    answer = record["answers"][0]
    words, boxes = record["ocr_tokens"], record["ocr_boxes"]
    start, end = crop_window(len(words), answer_span(words, answer), window, rng)
    return Example(record["question"], list(words[start:end]), list(boxes[start:end]), answer,
                   record["image_path"])


def reading_example(record: dict, window: int | None, rng: random.Random) -> Example | None:
    """A "what follows X?" question about a word that occurs once on the page.

    Returns:
        The example, or None when the page has no usable unique word.
    """
    words, boxes = record["ocr_tokens"], record["ocr_boxes"]
    counts = Counter(words)
    candidates = [i for i in range(len(words) - 1) if counts[words[i]] == 1]
    if not candidates:
        return None
    anchor = rng.choice(candidates)
    length = rng.randint(1, 3)
    span = (anchor, min(len(words), anchor + 1 + length))
    start, end = crop_window(len(words), span, window, rng)
    answer = " ".join(words[anchor + 1 : span[1]])
    question = rng.choice(READING_TEMPLATES).format(words[anchor])
    return Example(question, list(words[start:end]), list(boxes[start:end]), answer,
                   record["image_path"])


def transcription_example(record: dict, rng: random.Random) -> Example:
    """"read the text" on a page cut to one to four consecutive words; the answer is all of them."""
    words, boxes = record["ocr_tokens"], record["ocr_boxes"]
    length = min(len(words), rng.randint(1, MAX_TRANSCRIBED_WORDS))
    start = rng.randint(0, len(words) - length)
    kept = list(words[start : start + length])
    return Example(TRANSCRIPTION_QUESTION, kept, list(boxes[start : start + length]),
                   " ".join(kept), record["image_path"])


MIN_LAYOUT_SCALE = 0.5


def move_layout(boxes: Sequence[Sequence[float]], rng: random.Random) -> list[list[float]]:
    """The boxes under one random map `x -> sx * x + ox`, `y -> sy * y + oy` into the page.

    The scales are drawn in [MIN_LAYOUT_SCALE, 1] and the offsets so that the unit square stays
    inside the page, so every box stays valid and words keep their relative arrangement.
    """
    sx, sy = rng.uniform(MIN_LAYOUT_SCALE, 1.0), rng.uniform(MIN_LAYOUT_SCALE, 1.0)
    ox, oy = rng.uniform(0.0, 1.0 - sx), rng.uniform(0.0, 1.0 - sy)
    return [[sx * x0 + ox, sy * y0 + oy, sx * x1 + ox, sy * y1 + oy] for x0, y0, x1, y1 in boxes]


def make_example(record: dict, window: int | None, reading_share: float,
                 rng: random.Random, transcription_share: float = 0.0,
                 moved_share: float = 0.0) -> Example:
    """One example: transcription, reading or the record's QA pair, by the stage's shares.

    A `moved_share` of the examples get their layout moved (:func:`move_layout`).
    """
    draw = rng.random()
    example = None
    if draw < transcription_share and record["ocr_tokens"]:
        example = transcription_example(record, rng)
    elif draw < transcription_share + reading_share:
        example = reading_example(record, window, rng)
    if example is None:
        example = qa_example(record, window, rng)
    if moved_share and rng.random() < moved_share:
        example = replace(example, boxes=move_layout(example.boxes, rng))
    return example
