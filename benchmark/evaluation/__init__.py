"""Prediction and scoring loop shared by training, `pflkit evaluate` and the scoring worker.

Exports are imported lazily so that `pflkit --help` (which imports `benchmark.evaluation.cli`)
does not load torch.
"""

from __future__ import annotations

from benchmark.lazy_exports import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, {
    "loop": ("DEFAULT_BATCH_SIZE", "VisualTokenCache", "default_cache_dir", "evaluate", "predict",
             "score_predictions"),
    "personal": ("ClientScore", "PersonalisedResult", "evaluate_personalised"),
    "result": ("EvaluationResult", "GroupScore", "Prediction"),
})  # fmt: skip
