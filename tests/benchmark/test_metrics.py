"""ANLS and accuracy against hand-worked cases and an independent implementation of the official rules.

`official_anls` and `official_accuracy` restate the rules of the competition's own `metrics.py`
(rubenpt91/PFL-DocVQA-Competition, class `Evaluator`): answers and prediction lower-cased then
stripped; ANLS keeps the best similarity when it is >= 0.5, scores an empty prediction and the
prediction "none" 0; accuracy scores "none" 0 and counts an empty prediction equal to an empty
answer. The edit distance here is a textbook dynamic programme, independent of rapidfuzz.
"""

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


def _official_preprocess(text: str) -> str:
    return text.lower().strip()


def official_anls(prediction: str, answers: list[str]) -> float:
    """ANLS by the official `Evaluator._calculate_anls` rules (answer type "string")."""
    gold = [_official_preprocess(answer) for answer in answers]
    predicted = _official_preprocess(prediction)
    if len(predicted) == 0:
        return 0
    if predicted == "none":
        return 0
    similarities = [
        1 - reference_levenshtein(answer, predicted) / max(len(answer), len(predicted))
        for answer in gold
    ]
    best = max(similarities)
    return best if best >= 0.5 else 0


def official_accuracy(prediction: str, answers: list[str]) -> float:
    """Accuracy by the official `Evaluator._calculate_accuracy` rules (answer type "string")."""
    gold = [_official_preprocess(answer) for answer in answers]
    predicted = _official_preprocess(prediction)
    if predicted == "none":
        return 0
    return 1 if any(answer == predicted for answer in gold) else 0


@pytest.mark.parametrize(
    ("prediction", "answers", "expected"),
    [
        ("INV-2041", ["INV-2041"], 1.0),
        ("inv-2041", ["INV-2041"], 1.0),  # case-insensitive
        ("  INV-2041 \n", ["INV-2041"], 1.0),  # surrounding whitespace
        ("INV-2042", ["INV-2041"], 1 - 1 / 8),  # one substitution in eight characters
        ("abcd", ["abcx"], 0.75),
        ("ab", ["abcd"], 0.5),  # similarity 2/4 = 0.5: kept, as the official code does (>= 0.5)
        ("abc", ["abcdef"], 0.5),  # similarity 3/6 = 0.5: kept
        ("a", ["abc"], 0.0),  # similarity 1/3 < 0.5
        ("none", ["none"], 0.0),  # the prediction "none" always scores 0
        (" None ", ["x"], 0.0),
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
    assert anls_score(prediction, answers) == official_anls(prediction, answers)


def test_a_single_string_answer_is_accepted() -> None:
    assert anls_score("Acme GmbH", "acme gmbh") == 1.0
    assert exact_match("Acme GmbH", "acme gmbh") == 1.0


def test_exact_match_uses_the_same_normalisation() -> None:
    assert exact_match(" Total ", ["total"]) == 1.0
    assert exact_match("totals", ["total"]) == 0.0
    # the official rules: an empty prediction equal to an empty answer is accurate, "none" never
    assert exact_match("", [""]) == 1.0
    assert exact_match("  ", ["x", " "]) == 1.0
    assert exact_match("None", ["none"]) == 0.0


def test_no_gold_answer_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one gold answer"):
        anls_score("x", [])


def test_non_string_prediction_is_an_error() -> None:
    with pytest.raises(TypeError, match="prediction must be a string"):
        anls_score(None, ["x"])  # type: ignore[arg-type]


BOUNDARY_CASES = [
    ("ab", ["abcd"]), ("abcd", ["ab"]), ("abc", ["abcdef"]), ("abcdef", ["abc"]),
    ("ab", ["ax"]), ("a", ["b"]), ("", [""]), ("", ["a"]), ("a", [""]), (" ", [" "]),
    ("none", ["none"]), ("NONE", ["x"]), ("none ", ["non"]), ("nonE", [""]),
    ("\tx\n", ["X"]), ("ÄB", ["äb"]), ("ß", ["SS"]), ("İ", ["i̇"]), ("x y", ["x  y"]),
    ("12.50", ["12,50", "12.5", ""]), ("aaaa", ["aabb", "bbbb"]),
]


@pytest.mark.parametrize(("prediction", "answers"), BOUNDARY_CASES)
def test_boundary_cases_follow_the_official_rules(prediction: str, answers: list[str]) -> None:
    assert anls_score(prediction, answers) == official_anls(prediction, answers)
    assert exact_match(prediction, answers) == official_accuracy(prediction, answers)


def test_agrees_with_the_official_rules_on_random_pairs() -> None:
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
        prediction = rng.choice(["".join(mutated), "".join(mutated), "none", " "])
        assert anls_score(prediction, gold) == official_anls(prediction, gold)
        assert exact_match(prediction, gold) == official_accuracy(prediction, gold)


def test_agrees_with_the_official_rules_at_every_length_ratio() -> None:
    """Every (distance, length) pair up to 12 characters, where the 0.5 boundary is hit exactly."""
    checked = 0
    for length in range(1, 13):
        for edits in range(0, length + 1):
            prediction = "a" * length
            gold = "b" * edits + "a" * (length - edits)
            for answer in (gold, gold[: max(1, length - edits)]):
                assert anls_score(prediction, [answer]) == official_anls(prediction, [answer])
                checked += 1
    assert checked > 150


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
