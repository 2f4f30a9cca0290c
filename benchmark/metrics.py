"""Answer scoring: ANLS and exact-match accuracy, exactly as the competition scored them.

ANLS (Average Normalized Levenshtein Similarity) is the DocVQA metric of
Biten et al., "Scene Text Visual Question Answering", ICCV 2019
(https://arxiv.org/abs/1905.13648). The rules here are those of the official
PFL-DocVQA starter kit's `metrics.py` (rubenpt91/PFL-DocVQA-Competition), which
produced the published leaderboard; they differ from the paper's formula at the
threshold. For one question with gold answers ``a_1..a_n`` and prediction ``p``,
all lower-cased and stripped of surrounding whitespace:

    sim(p, a) = 1 - levenshtein(p, a) / max(len(p), len(a))
    m         = max_i sim(p, a_i)
    ANLS(p)   = m   if m >= 0.5 else 0          (the paper: 0 at NL = 0.5)

An empty prediction scores ANLS 0, and so does the prediction "none".
Accuracy is exact match after the same normalisation: "none" scores 0, and an
empty prediction equal to an empty gold answer counts as accurate.

These are pure functions: the training engine and the scoring worker import
the same code.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from rapidfuzz.distance import Levenshtein

ANLS_THRESHOLD = 0.5
#: The prediction the official metric always scores 0 (its answer for "not answerable").
NONE_ANSWER = "none"


def normalise_answer(text: str) -> str:
    """Lower-case and strip surrounding whitespace, as the official metric does."""
    return text.lower().strip()


def _as_answer_list(answers: str | Iterable[str]) -> list[str]:
    if isinstance(answers, str):
        return [answers]
    answer_list = list(answers)
    for answer in answer_list:
        if not isinstance(answer, str):
            raise TypeError(f"gold answers must be strings, got {type(answer).__name__}: {answer!r}")
    return answer_list


def anls_score(prediction: str, answers: str | Sequence[str], *, threshold: float = ANLS_THRESHOLD) -> float:
    """ANLS of one prediction against its gold answers.

    Args:
        prediction: The model's answer.
        answers: One gold answer or a list of them (the best match counts).
        threshold: Smallest similarity that is kept (0.5); below it the score is 0.

    Returns:
        A score in [0, 1].

    Raises:
        ValueError: If there is no gold answer.
        TypeError: If the prediction or an answer is not a string.
    """
    if not isinstance(prediction, str):
        raise TypeError(f"prediction must be a string, got {type(prediction).__name__}")
    gold = _as_answer_list(answers)
    if not gold:
        raise ValueError("a question needs at least one gold answer to be scored")
    predicted = normalise_answer(prediction)
    if not predicted or predicted == NONE_ANSWER:
        return 0.0
    best = max(_similarity(predicted, normalise_answer(answer)) for answer in gold)
    return best if best >= threshold else 0.0


def _similarity(predicted: str, reference: str) -> float:
    """1 - edit distance / longer length, computed as the official code does (same float)."""
    return 1 - Levenshtein.distance(predicted, reference) / max(len(predicted), len(reference))


def exact_match(prediction: str, answers: str | Sequence[str]) -> float:
    """1.0 when the normalised prediction equals one normalised gold answer, else 0.0.

    As in the official code, the prediction "none" scores 0 and an empty prediction
    equal to an empty gold answer scores 1.

    Raises:
        ValueError: If there is no gold answer.
    """
    if not isinstance(prediction, str):
        raise TypeError(f"prediction must be a string, got {type(prediction).__name__}")
    gold = _as_answer_list(answers)
    if not gold:
        raise ValueError("a question needs at least one gold answer to be scored")
    predicted = normalise_answer(prediction)
    if predicted == NONE_ANSWER:
        return 0.0
    return float(any(predicted == normalise_answer(answer) for answer in gold))


def corpus_scores(
    predictions: Sequence[str], answers_lists: Sequence[str | Sequence[str]]
) -> tuple[np.ndarray, np.ndarray]:
    """Per-question ANLS and accuracy for a whole split.

    Args:
        predictions: One prediction per question.
        answers_lists: The gold answers of each question, aligned with ``predictions``.

    Returns:
        Two float64 arrays of the same length: ANLS and exact match per question.
        Their means are the split's ANLS and accuracy.

    Raises:
        ValueError: If the two sequences differ in length.
    """
    if len(predictions) != len(answers_lists):
        raise ValueError(
            f"{len(predictions)} predictions for {len(answers_lists)} questions: "
            "pass exactly one prediction per question, in the same order"
        )
    anls = np.fromiter(
        (anls_score(p, a) for p, a in zip(predictions, answers_lists, strict=True)),
        dtype=np.float64,
        count=len(predictions),
    )
    accuracy = np.fromiter(
        (exact_match(p, a) for p, a in zip(predictions, answers_lists, strict=True)),
        dtype=np.float64,
        count=len(predictions),
    )
    return anls, accuracy
