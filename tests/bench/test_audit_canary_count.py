"""bench.audit_canary_count writes its table in the shape of
docs/results/data/audit_power_canaries.json."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench import audit_canary_count

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"


def test_kept_scores_give_the_committed_table_s_shape(
    tmp_path: Path, committed: Callable[[str], dict[str, Any]],
    written: Callable[[Path], dict[str, Any]],
) -> None:  # fmt: skip
    study, out = tmp_path / "study", tmp_path / "out"
    study.mkdir()
    out.mkdir()
    # the study's ledger gives the false claim: its dp-lora epsilon-1 runs' median tested epsilon
    shutil.copy(RESULTS / "audit_power.jsonl", study / "audit_power.jsonl")
    rng = np.random.default_rng(1)
    coins = (np.arange(100) % 2).astype(bool)
    scores = np.where(coins, 1.0, 0.0) + rng.normal(size=100)  # "in" canaries score higher
    (out / "canary_scores.jsonl").write_text(json.dumps(
        {"seed": 0, "label": "fedavg", "attack": "calibrated", "scores": scores.tolist(),
         "coins": coins.tolist()}) + "\n")  # fmt: skip
    table = tmp_path / "audit_power_canaries.json"
    audit_canary_count.main(["--study", str(study), "--out", str(out), "--draws", "3",
                             "--kept-only", "--record", str(table)])  # fmt: skip
    data = written(table)
    expected = committed("audit_power_canaries.json")
    assert data["columns"] == expected["columns"]
    assert [row["canaries"] for row in data["rows"]] == list(audit_canary_count.CANARY_COUNTS)
    assert [row["f_dp_every_guess_right"] for row in data["rows"]] == [
        row["f_dp_every_guess_right"] for row in expected["rows"]
    ]
    key = expected["columns"][3]["key"]
    assert all(row[key].endswith("%") for row in data["rows"])


def test_a_simulated_count_is_a_row() -> None:
    result = {"canaries": 50, "fdp": [0.0, 0.6171, 1.1184], "snj": [0.0, 0.3844, 0.6399],
              "contradicted": 0.425, "fdp_ceiling": 3.97912}  # fmt: skip
    (row,) = audit_canary_count.table_rows([result], 0.696)
    assert row == {"canaries": 50, "f_dp_bound_median_10_to_90": "0.617 (0.000 to 1.118)",
                   "snj_bound_median_10_to_90": "0.384 (0.000 to 0.640)",
                   "verdict_contradicts_the_false_claim_0_696": "42%",
                   "f_dp_every_guess_right": 3.979}  # fmt: skip
