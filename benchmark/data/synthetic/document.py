"""A generated document: its laid-out pages and the question/answer pairs asked about them."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from benchmark.data.synthetic.page import Page
from benchmark.data.synthetic.questions import ask


@dataclass(frozen=True)
class QA:
    """One question about one page; `answer` is a contiguous span of that page's OCR tokens."""

    question: str
    answer: str
    question_type: str
    page: int


@dataclass
class SyntheticDocument:
    """A document under construction: pages, the values printed on them, and its questions.

    Attributes:
        document_id: unique id of the document.
        provider_id: id of the company that issued it.
        pages: laid-out pages.
        values: (question_type, value, slots, page) for every askable value printed.
        qa: the question/answer pairs drawn by `draw_questions`.
    """

    document_id: str
    provider_id: str
    pages: list[Page] = field(default_factory=list)
    values: list[tuple[str, str, dict[str, str], int]] = field(default_factory=list)
    qa: list[QA] = field(default_factory=list)

    def new_page(self) -> Page:
        """Append and return an empty page."""
        self.pages.append(Page())
        return self.pages[-1]

    def mark(self, question_type: str, value: str, **slots: str) -> None:
        """Record that `value` (askable as `question_type`) was just printed on the current page."""
        self.values.append((question_type, " ".join(value.split()), slots, len(self.pages) - 1))

    def draw_questions(
        self, rng: random.Random, per_page: tuple[int, int], weights: dict[str, float]
    ) -> None:
        """Draw questions for every page from the values printed on it.

        Args:
            rng: the document's random generator.
            per_page: inclusive range of the number of questions per page.
            weights: sampling weight per question type (missing types weigh 1).
        """
        for page_index, page in enumerate(self.pages):
            tokens = page.tokens()
            printed = dict.fromkeys(
                (question_type, value, tuple(sorted(slots.items())))
                for question_type, value, slots, where in self.values
                if where == page_index and value
            )
            # Every value is checked against the OCR tokens: the answer is a span of the page.
            candidates = [
                (question_type, value, dict(slots))
                for question_type, value, slots in printed
                if _count_spans(tokens, value.split()) >= 1
            ]
            wanted = min(len(candidates), rng.randint(*per_page))
            chosen = _weighted_sample(
                candidates, [weights.get(c[0], 1.0) for c in candidates], wanted, rng
            )
            for question_type, value, slots in chosen:
                self.qa.append(
                    QA(ask(question_type, rng, **slots), value, question_type, page_index)
                )


def _count_spans(tokens: list[str], span: list[str]) -> int:
    """How many times `span` occurs contiguously in `tokens`."""
    n = len(span)
    return sum(1 for i in range(len(tokens) - n + 1) if tokens[i : i + n] == span)


def _weighted_sample(items: list, weights: list[float], k: int, rng: random.Random) -> list:
    """Sample `k` distinct items with probability proportional to their weights, keeping their order."""
    keys = [(rng.random() ** (1.0 / w), i) for i, w in enumerate(weights)]
    picked = sorted(i for _, i in sorted(keys, reverse=True)[:k])
    return [items[i] for i in picked]
