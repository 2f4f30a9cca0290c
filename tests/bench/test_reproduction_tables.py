"""bench.reproduction and bench.reproduction_margins write their results tables from the JSON lines
they append (docs/results/reproduction.jsonl, reproduction_margins.jsonl)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench import reproduction, reproduction_margins

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"


def test_the_committed_lines_give_the_committed_reproduction_table(
    tmp_path: Path, committed: Callable[[str], dict[str, Any]],
    written: Callable[[Path], dict[str, Any]],
) -> None:  # fmt: skip
    lines = Path(shutil.copy(RESULTS / "reproduction.jsonl", tmp_path / "reproduction.jsonl"))
    table = tmp_path / "reproduction.json"
    reproduction.main(["--out", str(lines), "--record", str(table), "--record-only"])
    data, expected = written(table), committed("reproduction.json")
    assert data["columns"] == expected["columns"]
    assert data["rows"] == expected["rows"]
    assert data["date"] == expected["date"] == "2026-11-27"
    assert data["versions"] == {"torch": "2.13.0+cpu"}


def test_a_measured_line_is_a_row(tmp_path: Path) -> None:
    line = {"preset": "dp-fedavg", "training_seconds": 100.04,
            "same_threads": {"verdict": "reproduced exactly", "seconds": 120.0,
                             "cost_over_training": 1.1995},
            "other_threads": {"threads": 4, "verdict": "not reproduced", "seconds": 90.0,
                              "apart": 1.0, "moved": 8.0, "ratio": 0.125,
                              "first_difference": None},
            "date": "2026-12-01", "machine": "2-core test machine", "torch": "2.13.0",
            "data": "tiny"}  # fmt: skip
    columns, (row,) = reproduction.table([line])
    assert [column.label for column in columns][6] == "re-run, 4 threads"
    assert row == {"preset": "`dp-fedavg` (sigma 1)", "rounds": 5, "training": "100.0 s",
                   "re_run_1_thread": "120.0 s", "cost": 1.2, "verdict": "reproduced exactly",
                   "re_run_4_threads": "90.0 s", "distance_change": "1.2e-1"}  # fmt: skip
    with pytest.raises(ValueError, match="one --other-threads"):
        reproduction.table([line, {**line, "other_threads": {**line["other_threads"], "threads": 2}}])


def test_the_committed_lines_give_every_row_of_the_margins_table(
    tmp_path: Path, committed: Callable[[str], dict[str, Any]],
    written: Callable[[Path], dict[str, Any]],
) -> None:  # fmt: skip
    lines = Path(shutil.copy(RESULTS / "reproduction_margins.jsonl", tmp_path / "margins.jsonl"))
    table = tmp_path / "reproduction_margins.json"
    reproduction_margins.main(["--out", str(lines), "--record", str(table), "--record-only"])
    data, expected = written(table), committed("reproduction_margins.json")
    assert data["columns"] == expected["columns"]
    # the page shows 4 of the 8 edits; the bench writes every one, in order
    assert [row for row in data["rows"] if row in expected["rows"]] == expected["rows"]
    assert len(data["rows"]) == 1 + len(reproduction_margins.EDITS) + len(
        reproduction_margins.NOISE_CUTS
    )
    extra = {row["what_was_submitted"] for row in data["rows"] if row not in expected["rows"]}
    assert extra == {"... 3%", "... 7%", "... 15%", "... 20%"}


def test_the_first_edit_every_preset_catches_is_marked() -> None:
    def line(preset: str, caught_from: float) -> dict[str, Any]:
        edits = {str(r): {"verdict": "not reproduced" if r >= caught_from else "reproduced",
                          "ratio": r} for r in (0.05, 0.1, 0.2)}  # fmt: skip
        return {"preset": preset, "honest": {"verdict": "reproduced", "ratio": 1e-5},
                "edits": edits, "tolerance": 0.08}  # fmt: skip

    _, rows = reproduction_margins.table([line("fedavg", 0.05), line("dp-lora", 0.1)])
    assert [row["what_was_submitted"] for row in rows] == [
        "the honest run", "checkpoint + noise of 5% of the change",
        "... 10% (first caught at tolerance 0.08)", "... 20%",
    ]  # fmt: skip
    assert rows[0] == {"what_was_submitted": "the honest run", "fedavg_10_rounds": "1.0e-5",
                       "dp_lora_30_rounds": "1.0e-5"}  # fmt: skip


def test_record_only_needs_a_table_to_write(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        reproduction.main(["--out", str(tmp_path / "x.jsonl"), "--record-only"])
    assert not (tmp_path / "x.jsonl").exists()


def test_figures_read_in_short_scientific_notation() -> None:
    assert reproduction.short_exponent(4.635e-05) == "4.6e-5"
    assert reproduction.short_exponent(12345.0) == "1.2e4"
    assert reproduction.short_exponent(None) == ""
