"""experiments.results_file.append_results_rows, the one place a bench adds a run's rows to a
results table (bench.bench's ``--record`` among them)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.bench import RECORD_COLUMNS, record
from experiments.results_file import append_results_rows, number, text, write_results_table

COLUMNS = (text("run", "run"), number("anls", "val ANLS"))


def test_two_records_are_two_rows_of_one_table(tmp_path: Path,
                                               written: Callable[[Path], dict[str, Any]]) -> None:  # fmt: skip
    path = tmp_path / "data" / "runs.json"
    append_results_rows(path, COLUMNS, [{"run": "a", "anls": 0.5}], command="bench --a",
                        note="on mini")  # fmt: skip
    append_results_rows(path, COLUMNS, [{"run": "b", "anls": 0.25}, {"run": "c", "anls": 0.0}],
                        command="bench --b")  # fmt: skip
    append_results_rows(path, COLUMNS, [{"run": "d", "anls": 1.0}], command="bench --a")
    data = written(path)
    assert [row["run"] for row in data["rows"]] == ["a", "b", "c", "d"]
    assert data["command"] == "bench --a; bench --b"  # a command repeated is named once
    assert data["note"] == "on mini"


def test_a_file_of_other_columns_becomes_a_new_table(tmp_path: Path) -> None:
    path = tmp_path / "runs.json"
    write_results_table(path, (text("run", "run"), number("anls", "test ANLS")),
                        [{"run": "old", "anls": 0.1}], command="older bench")  # fmt: skip
    append_results_rows(path, COLUMNS, [{"run": "new", "anls": 0.2}], command="bench")
    data = json.loads(path.read_text())
    assert data["rows"] == [{"run": "new", "anls": 0.2}]
    assert data["command"] == "bench"
    assert [column["label"] for column in data["columns"]] == ["run", "val ANLS"]


def test_bench_bench_records_through_it(tmp_path: Path) -> None:
    report = {"threads": 1, "kit_questions_per_second": 77.82,
              "reference_questions_per_second": 17.84, "speedup": 4.36, "speedup_cpu_time": 4.13,
              "differing_predictions": 0, "questions": 621, "kit_anls": 0.3344,
              "load_average": 1.2}  # fmt: skip
    path = tmp_path / "speed.json"
    write_results_table(path, COLUMNS, [{"run": "a", "anls": 0.5}], command="something else")
    record(path, report, command="python -m bench.bench --threads 1")
    record(path, {**report, "threads": 2}, command="python -m bench.bench --threads 2")
    data = json.loads(path.read_text())
    assert [column["key"] for column in data["columns"]] == [c.key for c in RECORD_COLUMNS]
    assert [row["threads"] for row in data["rows"]] == [1, 2]
    assert data["rows"][0]["differing"] == "0 / 621"
