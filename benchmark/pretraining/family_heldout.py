"""What a family's learning curve is measured on, and the floor it is read against.

Every point of the curve scores one seeded sample of the public val split (documents never
trained on). Two further figures tell learning from reading apart:

- the ANLS of that sample's questions whose answer is a value (it has a digit) that no training
  question has as answer: such an answer cannot be remembered, only read off the page
  (VT5's target measure, :mod:`benchmark.pretraining.heldout`);
- the *answer prior*: the ANLS of answering every question with the answer its wording gets
  most often in training, without looking at the page. A model at or below it has learnt which
  answers are common, not how to read.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from benchmark.metrics import corpus_scores, normalise_answer
from benchmark.pretraining.heldout import is_value_answer


def val_sample(validation: Any, *, limit: int, seed: int) -> Any:
    """A seeded sample of at most ``limit`` public val questions (the same at every point).

    Raises:
        ValueError: for an empty val split.
    """
    if len(validation) == 0:
        raise ValueError("the public val split is empty: generate the benchmark again "
                         "(pflkit data generate) with more public documents")  # fmt: skip
    shuffled = validation.shuffle(seed=seed)
    return shuffled.select(range(min(limit, len(shuffled))))


def unseen_value_ids(questions: Any, training: Any) -> set[int]:
    """Question ids of ``questions`` whose answer is a value no training answer equals."""
    seen = {normalise_answer(answer) for answers in training["answers"] for answer in answers}
    return {
        int(question_id)
        for question_id, answers in zip(questions["question_id"], questions["answers"],
                                        strict=True)  # fmt: skip
        if is_value_answer(answers[0])
        and not any(normalise_answer(answer) in seen for answer in answers)
    }


def answer_prior(training: Any) -> dict[str, str]:
    """Each training question's wording -> the answer it gets most often (ties: the first
    seen), with ``""`` -> the commonest answer of all, for wordings never trained on."""
    by_question: dict[str, Counter[str]] = defaultdict(Counter)
    overall: Counter[str] = Counter()
    for question, answers in zip(training["question"], training["answers"], strict=True):
        by_question[question][answers[0]] += 1
        overall[answers[0]] += 1
    prior = {question: counts.most_common(1)[0][0] for question, counts in by_question.items()}
    prior[""] = overall.most_common(1)[0][0] if overall else ""
    return prior


def answer_prior_anls(questions: Any, training: Any) -> float:
    """ANLS of :func:`answer_prior`'s answers on ``questions`` (no page read)."""
    prior = answer_prior(training)
    guesses = [prior.get(question, prior[""]) for question in questions["question"]]
    gold: Sequence[list[str]] = [list(answers) for answers in questions["answers"]]
    anls, _ = corpus_scores(guesses, gold)
    return float(anls.mean()) if len(anls) else 0.0


def mean_anls_of(result: Any, question_ids: set[int]) -> float | None:
    """Mean ANLS of an evaluation's predictions of these question ids (``None``: none)."""
    scores = [p.anls for p in result.predictions if p.question_id in question_ids]
    return sum(scores) / len(scores) if scores else None
