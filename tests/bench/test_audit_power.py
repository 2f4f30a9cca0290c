"""bench.audit_power writes its results tables from its ledger (docs/results/audit_power.jsonl,
audit_power_reconstruction.jsonl)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench import audit_power

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"


def record_only(ledger: str, tmp_path: Path) -> Path:
    """``--record-only`` on a copy of a committed ledger; the folder of the written tables."""
    shutil.copy(RESULTS / ledger, tmp_path / "audit_power.jsonl")
    audit_power.main(["--out", str(tmp_path), "--record", str(tmp_path / "data"),
                      "--record-only"])  # fmt: skip
    return tmp_path / "data"


def test_the_membership_ledger_gives_the_committed_summary_and_draws(
    tmp_path: Path, committed: Callable[[str], dict[str, Any]],
    written: Callable[[Path], dict[str, Any]],
) -> None:  # fmt: skip
    folder = record_only("audit_power.jsonl", tmp_path)
    for name in ("audit_power_summary.json", "audit_power_draws.json"):
        data, expected = written(folder / name), committed(name)
        assert data["columns"] == expected["columns"], name
        assert data["rows"] == expected["rows"], name
        assert "bench.audit_power --out" in data["command"]
    assert not (folder / "audit_power_reconstruction.json").exists()


def test_the_reconstruction_ledger_gives_the_committed_figures(
    tmp_path: Path, committed: Callable[[str], dict[str, Any]],
    written: Callable[[Path], dict[str, Any]],
) -> None:  # fmt: skip
    folder = record_only("audit_power_reconstruction.jsonl", tmp_path)
    data = written(folder / "audit_power_reconstruction.json")
    expected = committed("audit_power_reconstruction.json")
    assert data["columns"] == expected["columns"]
    measured = ("seed", "bound", "right_of_guessed", "auc_true_vs_wrong_candidates", "tpr_at_10_fpr")
    assert [[row[key] for key in measured] for row in data["rows"]] == [
        [row[key] for key in measured] for row in expected["rows"]
    ]
    # these lines predate the ledger's val ANLS; the top-1 count is not in an audit's line
    assert {row["val_anls_100_q"] for row in data["rows"]} == {""}
    assert {row["top_1_right_of_100"] for row in data["rows"]} == {""}
    assert not (folder / "audit_power_summary.json").exists()


def test_a_line_s_val_anls_is_its_run_s(tmp_path: Path) -> None:
    (tmp_path / "submission.json").write_text('{"val_anls": 0.49771}')
    assert audit_power.val_anls(tmp_path) == 0.49771
    assert audit_power.val_anls(tmp_path / "missing") is None
    row = {"seed": 0, "label": "fedavg", "kind": "reconstruction", "val_anls": 0.49771,
           "audit_epsilon": 0.0949, "fdp_correct": 19, "fdp_guesses": 100, "auc": 0.5167,
           "tpr": 0.13}  # fmt: skip
    (table_row,) = audit_power.reconstruction_rows([row])
    assert table_row["val_anls_100_q"] == 0.4977 and table_row["bound"] == 0.095


def test_the_study_needs_seeds_unless_it_only_records(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        audit_power.main(["--out", str(tmp_path)])
