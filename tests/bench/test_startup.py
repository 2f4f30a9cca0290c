"""bench/startup.py walks every group and command of pflkit (the figures are printed, not tested),
and writes its results table in the shape of docs/results/data/startup.json."""

from __future__ import annotations

import shlex
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from bench.startup import (
    EPSILON_ARGS,
    REFERENCE,
    REFERENCES,
    TABLE_COLUMNS,
    _environment,
    benchmark_commands,
    command_paths,
    measurement,
    table_rows,
    time_side_by_side,
)
from experiments.results_file import write_results_table


def test_command_paths_walk_groups_recursively_and_skip_hidden_commands() -> None:
    @click.group()
    def root() -> None:
        """Root."""

    @root.group()
    def outer() -> None:
        """Outer."""

    @outer.command()
    def inner() -> None:
        """Inner."""

    @root.command(hidden=True)
    def secret() -> None:
        """Hidden."""

    assert command_paths(root) == [(), ("outer",), ("outer", "inner")]


def test_the_bench_times_every_help_the_epsilon_and_train_help() -> None:
    commands = dict(benchmark_commands())
    assert commands[("--help",)] == commands[("train", "--help")] == 0.3
    assert commands[("dp", "epsilon", "--help")] == 0.3
    assert commands[EPSILON_ARGS] == 1.0
    assert ("evaluator", "backup", "--help") in commands


def test_the_recorded_table_has_the_committed_columns_and_commands(
    tmp_path: Path, committed: Callable[[str], dict[str, Any]],
    written: Callable[[Path], dict[str, Any]],
) -> None:  # fmt: skip
    env = _environment()
    before, after = time_side_by_side([sys.executable, "-c", "pass"], 2, env, env)
    assert before is not None
    measured = [measurement("pflkit " + " ".join(args), goal, after, before)
                for args, goal in benchmark_commands()]  # fmt: skip
    measured += [measurement(REFERENCE + shlex.join(["python", *libraries]), None, after, None)
                 for libraries in REFERENCES]  # fmt: skip
    path = write_results_table(tmp_path / "startup.json", TABLE_COLUMNS,
                               table_rows(measured, compared=True), command="test")  # fmt: skip
    data, startup = written(path), committed("startup.json")
    assert data["columns"] == startup["columns"] == committed("startup_epsilon.json")["columns"]
    commands = [row["command"] for row in data["rows"]]
    # every command of the committed table, in its order (it predates the first reference)
    assert [c for c in commands if c in {row["command"] for row in startup["rows"]}] == [
        row["command"] for row in startup["rows"]
    ]
    first = data["rows"][0]
    assert first["command"] == "`pflkit --help`" and first["goal"] == "0.3 s"
    assert first["before_median"] == round(statistics.median(before[0]), 3)
    assert first["max_2"] == round(max(after[0]), 3)
    assert first["cpu_2"] == round(statistics.median(after[1]), 3)
    # a reference the before tree did not run is dashes; the epsilon's goal is 1 s
    assert data["rows"][-1]["before_median"] == "-" and data["rows"][-1]["goal"] == "-"
    assert {row["goal"] for row in data["rows"] if "epsilon --noise" in row["command"]} == {"1 s"}


def test_without_a_before_tree_the_before_cells_are_empty() -> None:
    timing = ([0.25, 0.5, 0.125], [0.1, 0.2, 0.3])
    (row,) = table_rows([measurement("pflkit --help", 0.3, timing)], compared=False)
    assert row == {"command": "`pflkit --help`", "goal": "0.3 s", "before_median": "",
                   "max": "", "cpu": "", "after_median": 0.25, "max_2": 0.5, "cpu_2": 0.2}  # fmt: skip
