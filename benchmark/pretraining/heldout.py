"""The held-out questions that tell whether the base model can read.

The target of the recipe: on held-out documents of the public corpus, ANLS >= 0.8 on questions
whose answer is a document-specific value (numbers, dates, amounts, identifiers: an answer with
a digit) that never appeared as an answer in training. Such an answer cannot be memorised; it
can only be copied from the page.
"""

from __future__ import annotations

from typing import Any

from benchmark.metrics import normalise_answer
from benchmark.pretraining.examples import move_layout

TARGET_ANLS = 0.8


def is_value_answer(answer: str) -> bool:
    """Whether an answer is a document-specific value: it contains a digit."""
    return any(character.isdigit() for character in answer)


def unseen_value_questions(validation: Any, training: Any, *, limit: int, seed: int) -> Any:
    """Validation questions with a value answer that no training question has.

    Args:
        validation: `load_split` dataset of held-out public documents.
        training: `load_split` dataset the model is trained on.
        limit: most questions kept (a seeded sample, for a fast evaluation).
        seed: sampling seed.

    Returns:
        The selected rows of `validation`.

    Raises:
        ValueError: if no validation question qualifies.
    """
    seen = {normalise_answer(answer) for answers in training["answers"] for answer in answers}
    keep = [
        index
        for index, answers in enumerate(validation["answers"])
        if is_value_answer(answers[0])
        and not any(normalise_answer(answer) in seen for answer in answers)
    ]
    if not keep:
        raise ValueError(
            "no held-out public question has a value answer unseen in training: generate the "
            "benchmark again (pflkit data generate) or with more public documents"
        )
    selected = validation.select(keep).shuffle(seed=seed)
    return selected.select(range(min(limit, len(selected))))


def with_moved_layouts(questions: Any, *, seed: int) -> Any:
    """The same questions with every page's boxes moved by a seeded random map.

    Public documents of one kind share a template; a model that scores well on them but not
    on their moved copies has learnt where answers sit, not how to read (and will not transfer
    to the invoices' layouts).
    """
    import random

    def move(row: dict, index: int) -> dict:
        return {"ocr_boxes": move_layout(row["ocr_boxes"], random.Random(seed * 100_003 + index))}

    return questions.map(move, with_indices=True, load_from_cache_file=False)
