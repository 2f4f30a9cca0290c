"""bench.memorybench writes its peaks into the tables of docs/results/data/memory_evaluate.json
and memory_worker_steps.json, one side (before or after) a run."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.memorybench import (
    STEP_COLUMNS,
    evaluate_cells,
    evaluate_columns,
    record_side,
    step_cells,
)

DATA = Path(__file__).resolve().parents[2] / "docs" / "results" / "data"
FILE_MIB = 1282.0


def measured(scale: float = 1.0) -> list[dict[str, Any]]:
    """The bench's rows (its ``--json``) of one run of the three paths."""
    steps = {name: {"peak_mib": scale * peak, "after_mib": 500.0, "seconds": 1.5}
             for name, peak in (("start-up", 557.0), ("check_checkpoint", 789.0), ("bind", 743.0),
                                ("noise_floor", 1527.0), ("score", 2778.0))}  # fmt: skip
    rows = [{"path": "evaluate", "peak_mib": scale * 2761.0, "seconds": 60.0},
            {"path": "worker", "peak_mib": scale * 2778.0, "seconds": 90.0, "steps": steps},
            {"path": "floor", "peak_mib": scale * 1852.0, "seconds": 50.0}]  # fmt: skip
    for row in rows:
        row.update(file_mib=FILE_MIB, ratio=row["peak_mib"] / FILE_MIB)
    return rows


def test_a_run_fills_one_side_and_keeps_the_other(
    tmp_path: Path, committed: Callable[[str], dict[str, Any]],
    written: Callable[[Path], dict[str, Any]],
) -> None:  # fmt: skip
    evaluate, steps = tmp_path / "memory_evaluate.json", tmp_path / "memory_worker_steps.json"
    for side, scale in (("before", 1.5), ("after", 1.0)):
        record_side(evaluate, evaluate_columns(20), evaluate_cells(measured(scale), 20, 32), side,
                    command="python -m bench.memorybench")  # fmt: skip
        record_side(steps, STEP_COLUMNS, step_cells(measured(scale)), side,
                    command="python -m bench.memorybench")  # fmt: skip
    data = written(evaluate)
    assert data["columns"] == committed("memory_evaluate.json")["columns"]
    assert [(row["before"], row["after"]) for row in data["rows"]] == [
        ("4,142 MiB, 3.23x", "2,761 MiB, 2.15x"),
        ("4,167 MiB, 3.25x", "2,778 MiB, 2.17x"),
        ("2,778 MiB, 2.17x", "1,852 MiB, 1.44x"),
    ]
    first = data["columns"][0]["key"]
    assert data["rows"][0][first].startswith("`pflkit evaluate CKPT --split test --limit 20`")
    # the worker's and the floor's rows read as the committed table's
    assert [row[first] for row in data["rows"][1:]] == [
        row[first] for row in committed("memory_evaluate.json")["rows"][1:]
    ]

    data = written(steps)
    expected = committed("memory_worker_steps.json")
    assert data["columns"] == expected["columns"]
    assert [row["worker_step"] for row in data["rows"]] == [
        row["worker_step"] for row in expected["rows"]
    ]
    assert data["rows"][4]["after"] == expected["rows"][4]["after"] == "2,778 MiB, 2.17x"


def test_a_run_recorded_into_the_committed_table_keeps_its_before_column(tmp_path: Path) -> None:
    path = Path(shutil.copy(DATA / "memory_worker_steps.json", tmp_path / "steps.json"))
    earlier = json.loads(path.read_text())
    record_side(path, STEP_COLUMNS, step_cells(measured(0.5)), "after", command="again")
    data = json.loads(path.read_text())
    assert [row["before"] for row in data["rows"]] == [row["before"] for row in earlier["rows"]]
    assert data["rows"][0]["after"] == "278 MiB, 0.22x"
    assert data["command"] == f"{earlier['command']}; again"


def test_more_questions_name_another_table() -> None:
    assert evaluate_columns(50)[0].label == "what runs (50 test questions)"
