"""bench.auditbench writes its table in the shape of docs/results/data/audit_mini.json."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.auditbench import canary_count, table_columns, table_rows
from experiments.results_file import write_results_table

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"


def audit_lines() -> list[dict[str, Any]]:
    """``pflkit audit --json``'s rows of recorded audits (audit_mini_c10.jsonl)."""
    text = (RESULTS / "audit_mini_c10.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def test_each_audited_run_is_a_row_of_the_committed_columns(
    tmp_path: Path, committed: Callable[[str], dict[str, Any]],
    written: Callable[[Path], dict[str, Any]],
) -> None:  # fmt: skip
    (tmp_path / "evaluator").mkdir()
    (tmp_path / "evaluator" / "canaries.json").write_text(
        json.dumps({"canaries": [{"provider": i, "included": i % 2} for i in range(100)]})
    )
    rows = audit_lines()
    columns = table_columns("question", canary_count(tmp_path))
    path = write_results_table(tmp_path / "audit_mini.json", columns, table_rows(rows),
                               command="python -m bench.auditbench")  # fmt: skip
    data = written(path)
    assert data["columns"] == committed("audit_mini.json")["columns"]
    liar = next(r for r in data["rows"] if r["run"] == "fedavg-strong-claims-eps1")
    source = next(r for r in rows if r["run"].endswith("/fedavg-strong-claims-eps1"))
    assert liar == {"run": "fedavg-strong-claims-eps1", "claim_delta": "1 (1e-05)",
                    "question_bound": round(source["audit_epsilon"], 3), "auc": 0.799,
                    "tpr_at_fpr": "0.688 at 0.096", "guesses_right": "24 of 25",
                    "secret_auc": 0.705, "contradicted": "**yes**",
                    "audit": f"{source['audit_seconds']:.1f} s"}  # fmt: skip


def test_another_attack_names_its_bound_and_leaves_the_secret_auc_empty() -> None:
    row = {**audit_lines()[0], "attack": "calibrated", "auc_by_attack": {"calibrated": 0.5}}
    (table_row,) = table_rows([row])
    assert "calibrated_bound" in table_row and table_row["secret_auc"] == ""
    assert table_columns("calibrated", 100)[2].label == "`calibrated`: bound (0.05 / 16, SNJ or f-DP)"
