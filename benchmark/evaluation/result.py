"""`EvaluationResult`: scores of one checkpoint on one split, overall and broken down."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Prediction:
    """One scored question."""

    question_id: int
    prediction: str
    answers: list[str]
    anls: float
    accuracy: float
    distribution: str = ""
    question_type: str = ""


@dataclass(frozen=True)
class GroupScore:
    """Mean scores of a group of questions."""

    anls: float
    accuracy: float
    n: int


@dataclass(frozen=True)
class EvaluationResult:
    """Scores of a checkpoint on a split.

    Attributes:
        anls: mean ANLS over the questions.
        accuracy: mean exact-match accuracy.
        n: number of questions.
        by_distribution: scores of the "in" / "out" questions (test and val of the benchmark).
        by_question_type: scores per question type (the key a question asks about).
        predictions: every question's prediction and scores, in dataset order.
        seconds: wall-clock time of prediction.
    """

    anls: float
    accuracy: float
    n: int
    by_distribution: dict[str, GroupScore] = field(default_factory=dict)
    by_question_type: dict[str, GroupScore] = field(default_factory=dict)
    predictions: list[Prediction] = field(default_factory=list)
    seconds: float = 0.0

    @classmethod
    def from_predictions(cls, predictions: Sequence[Prediction], seconds: float = 0.0) -> EvaluationResult:
        """Aggregate scored questions into overall and per-group means."""
        anls = np.array([p.anls for p in predictions], dtype=np.float64)
        accuracy = np.array([p.accuracy for p in predictions], dtype=np.float64)
        return cls(
            anls=float(anls.mean()) if len(anls) else 0.0,
            accuracy=float(accuracy.mean()) if len(accuracy) else 0.0,
            n=len(predictions),
            by_distribution=_groups(predictions, "distribution"),
            by_question_type=_groups(predictions, "question_type"),
            predictions=list(predictions),
            seconds=seconds,
        )

    @property
    def questions_per_second(self) -> float:
        """Prediction throughput."""
        return self.n / self.seconds if self.seconds > 0 else float("nan")

    def summary(self) -> dict:
        """JSON-ready scores without the per-question predictions."""
        return {
            "anls": self.anls,
            "accuracy": self.accuracy,
            "n": self.n,
            "by_distribution": {k: asdict(v) for k, v in self.by_distribution.items()},
            "by_question_type": {k: asdict(v) for k, v in self.by_question_type.items()},
            "seconds": round(self.seconds, 3),
            "questions_per_second": round(self.questions_per_second, 3),
        }

    def write_predictions(self, path: str | Path) -> Path:
        """Write one JSON line per question (question_id, prediction, answers, anls, ...) atomically."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                for prediction in self.predictions:
                    out.write(json.dumps(asdict(prediction), ensure_ascii=False) + "\n")
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path


def _groups(predictions: Sequence[Prediction], attribute: str) -> dict[str, GroupScore]:
    """Mean scores per non-empty value of a prediction attribute."""
    grouped: dict[str, list[Prediction]] = {}
    for prediction in predictions:
        key = getattr(prediction, attribute)
        if key:
            grouped.setdefault(key, []).append(prediction)
    return {
        key: GroupScore(
            anls=float(np.mean([p.anls for p in members])),
            accuracy=float(np.mean([p.accuracy for p in members])),
            n=len(members),
        )
        for key, members in sorted(grouped.items())
    }
