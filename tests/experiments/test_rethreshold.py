"""experiments.rethreshold: a table's threshold columns from the figures it holds."""

from __future__ import annotations

import json
from pathlib import Path

from experiments import rethreshold

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "docs/results/data"


def test_the_rounds_and_bytes_to_a_threshold_come_from_the_test_anls_per_round() -> None:
    data = {"columns": [{"key": "test_anls_per_round"}], "note": "old",
            "rows": [{"test_anls_per_round": "0.30, 0.41, 0.42", "bytes_per_message": 250},
                     {"test_anls_per_round": "0.30, 0.31", "bytes_per_message": 250}]}  # fmt: skip
    out = rethreshold.rethreshold(data, 0.41, shown="{{ figure.threshold }}")
    assert [(r["round_at_threshold"], r["bytes_to_threshold"]) for r in out["rows"]] == [
        (2, "2.00 kB"),
        ("not reached", "n/a"),
    ]
    assert out["note"].startswith("threshold: {{ figure.threshold }} (the threshold in force")
    assert "round_at_threshold" not in data["rows"][0]  # the input is left as it is
    recipes = {"columns": [{"key": "reaches_threshold"}], "rows": [{"test_anls": 0.42}]}
    assert rethreshold.rethreshold(recipes, 0.43)["rows"][0]["reaches_threshold"] == "no"


def test_the_shown_tables_are_at_the_threshold_in_force() -> None:
    threshold = rethreshold.reference_figure("threshold")
    for name in ("optimiser_track1.json", "recipes_1000x.json"):
        data = json.loads((DATA / name).read_text(encoding="utf-8"))
        assert rethreshold.rethreshold(data, threshold, shown="{{ figure.threshold }}") == data
