"""Prediction and scoring loop shared by training, `pflkit evaluate` and the scoring worker.

Exports are imported lazily so that `pflkit --help` (which imports `benchmark.evaluation.cli`)
does not load torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "DEFAULT_BATCH_SIZE": "benchmark.evaluation.loop",
    "VisualTokenCache": "benchmark.evaluation.loop",
    "default_cache_dir": "benchmark.evaluation.loop",
    "evaluate": "benchmark.evaluation.loop",
    "predict": "benchmark.evaluation.loop",
    "score_predictions": "benchmark.evaluation.loop",
    "ClientScore": "benchmark.evaluation.personal",
    "PersonalisedResult": "benchmark.evaluation.personal",
    "evaluate_personalised": "benchmark.evaluation.personal",
    "EvaluationResult": "benchmark.evaluation.result",
    "GroupScore": "benchmark.evaluation.result",
    "Prediction": "benchmark.evaluation.result",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'benchmark.evaluation' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
