"""bench.flowerbench adds a run's engines to the table of docs/results/data/flower_mini.json."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from bench.flowerbench import TABLE_COLUMNS, _summary, next_run_number, table_rows
from experiments.results_file import append_results_rows

DATA = Path(__file__).resolve().parents[2] / "docs" / "results" / "data"


def run_directory(path: Path, wall: float, training: float, weight: float,
                  messages: bool) -> Path:  # fmt: skip
    """A finished run's files that ``_summary`` reads."""
    (path / "state" / "round-1").mkdir(parents=True)
    (path / "state" / "latest.json").write_text(json.dumps({"dir": "round-1"}))
    save_file({"w": torch.full((2, 2), weight)}, path / "state" / "round-1" / "global.safetensors")
    (path / "metrics.jsonl").write_text(
        json.dumps({"round": 1, "wall_seconds": wall, "client_training_seconds": training}) + "\n"
    )
    (path / "communication_log.jsonl").write_text('{"round": 0, "sender": -1}\n')
    if messages:
        rows = [{"sender": -1, "framing_bytes": 120, "payload_bytes": 4096},
                {"sender": 3, "framing_bytes": 130, "payload_bytes": 4096}]  # fmt: skip
        (path / "flower_messages.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_each_engine_is_a_row_numbered_after_the_earlier_runs(
    tmp_path: Path, committed: Callable[[str], dict[str, Any]],
    written: Callable[[Path], dict[str, Any]],
) -> None:  # fmt: skip
    reference = run_directory(tmp_path / "in-process", 99.31, 99.2, 0.0, messages=False)
    simulation = run_directory(tmp_path / "simulation", 113.52, 101.8, 0.25, messages=True)
    results = {"in-process": {**_summary(reference, 125.62, None), "load_average": [4.6, 4.5]},
               "simulation": {**_summary(simulation, 163.3, reference),
                              "load_average": [4.52, 6.2]}}  # fmt: skip
    path = tmp_path / "flower_mini.json"
    assert next_run_number(path) == 1
    append_results_rows(path, TABLE_COLUMNS, table_rows(results, 1), command="one")
    append_results_rows(path, TABLE_COLUMNS, table_rows(results, next_run_number(path)),
                        command="two")  # fmt: skip
    data = written(path)
    assert data["columns"] == committed("flower_mini.json")["columns"]
    assert [row["run"] for row in data["rows"]] == [1, "", 2, ""]
    assert data["rows"][0] == {"run": 1, "engine": "in process", "load_average": "4.6 to 4.5",
                               "command": "125.6 s", "loop": "99.3 s",
                               "client_training": "99.2 s", "loop_training": 1.0,
                               "log_equal": "(reference)", "largest_weight_difference": ""}  # fmt: skip
    assert data["rows"][1] == {"run": "", "engine": "Flower simulation (Ray)",
                               "load_average": "4.5 to 6.2", "command": "163.3 s",
                               "loop": "113.5 s", "client_training": "101.8 s",
                               "loop_training": 1.11, "log_equal": "yes",
                               "largest_weight_difference": 0.25}  # fmt: skip


def test_the_committed_table_s_next_run_is_its_third(tmp_path: Path) -> None:
    path = Path(shutil.copy(DATA / "flower_mini.json", tmp_path / "flower_mini.json"))
    assert next_run_number(path) == 3
