"""ANLS and accuracy against hand-worked cases and an independent implementation."""

from __future__ import annotations

import random

import numpy as np
import pytest

from benchmark.metrics import anls_score, corpus_scores, exact_match


def reference_levenshtein(a: str, b: str) -> int:
    """Textbook dynamic programme, independent of rapidfuzz."""
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, start=1):
        current = [i]
        for j, char_b in enumerate(b, start=1):
            current.append(
                min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b))
            )
        previous = current
    return previous[-1]


def reference_anls(prediction: str, answers: list[str]) -> float:
    """ANLS as written in Biten et al. 2019, with the kit's normalisation."""
    predicted = prediction.strip().lower()
    if not predicted:
        return 0.0
    scores = []
    for answer in answers:
        gold = answer.strip().lower()
        distance = reference_levenshtein(predicted, gold) / max(len(predicted), len(gold))
        scores.append(1 - distance if distance < 0.5 else 0.0)
    return max(scores)


@pytest.mark.parametrize(
    ("prediction", "answers", "expected"),
    [
        ("INV-2041", ["INV-2041"], 1.0),
        ("inv-2041", ["INV-2041"], 1.0),  # case-insensitive
        ("  INV-2041 \n", ["INV-2041"], 1.0),  # surrounding whitespace
        ("INV-2042", ["INV-2041"], 1 - 1 / 8),  # one substitution in eight characters
        ("abcd", ["abcx"], 0.75),
        ("ab", ["abcd"], 0.0),  # NL = 2/4 = 0.5: at the threshold, no credit
        ("abc", ["abcdef"], 0.0),  # NL = 3/6 = 0.5: at the threshold, no credit
        ("abcd", ["abcdef"], 1 - 2 / 6),  # NL = 1/3 < 0.5
        ("", ["anything"], 0.0),  # empty prediction
        ("   ", ["x"], 0.0),  # whitespace only is empty
        ("", [""], 0.0),  # empty prediction scores 0 even against an empty answer
        ("12.50", ["12,50", "12.50"], 1.0),  # best of several gold answers
        ("12.5", ["12,50", "EUR 12.50"], 0.6),  # 2 edits / 5 chars vs "12,50"; 5/9 vs the other
    ],
)
def test_hand_worked_cases(prediction: str, answers: list[str], expected: float) -> None:
    assert anls_score(prediction, answers) == pytest.approx(expected)
    assert anls_score(prediction, answers) == pytest.approx(reference_anls(prediction, answers))


def test_a_single_string_answer_is_accepted() -> None:
    assert anls_score("Acme GmbH", "acme gmbh") == 1.0
    assert exact_match("Acme GmbH", "acme gmbh") == 1.0


def test_exact_match_uses_the_same_normalisation() -> None:
    assert exact_match(" Total ", ["total"]) == 1.0
    assert exact_match("totals", ["total"]) == 0.0
    assert exact_match("", [""]) == 0.0


def test_no_gold_answer_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one gold answer"):
        anls_score("x", [])


def test_non_string_prediction_is_an_error() -> None:
    with pytest.raises(TypeError, match="prediction must be a string"):
        anls_score(None, ["x"])  # type: ignore[arg-type]


def test_agrees_with_independent_implementation_on_random_pairs() -> None:
    rng = random.Random(1234)
    alphabet = "abcAB 12.-"
    for _ in range(3000):
        gold = ["".join(rng.choices(alphabet, k=rng.randint(0, 12))) for _ in range(rng.randint(1, 3))]
        base = rng.choice(gold)
        mutated = list(base)
        for _ in range(rng.randint(0, 4)):
            position = rng.randint(0, len(mutated))
            operation = rng.choice(["insert", "delete", "replace"])
            if operation == "insert":
                mutated.insert(position, rng.choice(alphabet))
            elif mutated and position < len(mutated):
                if operation == "delete":
                    del mutated[position]
                else:
                    mutated[position] = rng.choice(alphabet)
        prediction = "".join(mutated)
        assert anls_score(prediction, gold) == pytest.approx(reference_anls(prediction, gold), abs=1e-12)


def test_corpus_scores_are_the_per_question_scores() -> None:
    predictions = ["INV-1", "acme", ""]
    answers = [["INV-1"], ["ACME GmbH", "Acme"], ["x"]]
    anls, accuracy = corpus_scores(predictions, answers)
    assert anls.tolist() == [1.0, 1.0, 0.0]
    assert accuracy.tolist() == [1.0, 1.0, 0.0]
    assert float(np.mean(anls)) == pytest.approx(2 / 3)


def test_corpus_scores_length_mismatch_is_an_error() -> None:
    with pytest.raises(ValueError, match="one prediction per question"):
        corpus_scores(["a"], [["a"], ["b"]])
