"""The GPU check's results tables (``docs/results/data/gpu_check_*.json``) from its output folders.

``make gpu-check`` (:mod:`bench.gpucheck`) writes ``gpucheck.json`` and the tests step's JUnit
report ``tests.xml`` to its output folder; this module turns one or more such folders (one per
call of the lent machine, in order) into the tables that docs/results/gpu.md shows:

- ``gpu_check_steps.json``: each call's steps, their status and seconds;
- ``gpu_check_tests.json``: each test marked ``cuda``, its outcome in each call;
- ``gpu_check_scoring.json``: the kit's prediction loop against the official ``eval.py`` loop;
- ``gpu_check_training.json``: one client's training at the real shape: the official ``fl_train``
  loop, the real-size steps and the 24 GB settings (seconds, examples per second, peak memory);
- ``gpu_check_round.json``: one whole round, split into setup, training, evaluation and the rest.

Usage: ``python -m bench.gpucheck_tables --run DIR [--run DIR ...] --out docs/results/data
--date 2026-11-28 --machine TEXT``; the folders' ``gpucheck.json`` are kept beside the tables
by the caller (docs/results/gpucheck_h200/).
"""

from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ElementTree
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments.results_file import Column, number, text, write_results_table

GIB = 2**30
PRESET_TEST = "test_a_short_round_of_every_preset_on_the_device"


TESTS_NOTE = ("`not reached`: the tests step's time limit ended the run before the test; a "
              "message is the test's first line of failure.")  # fmt: skip
SCORING_NOTE = ("The random VT5 of the real shape on the generated `mini` test split, batch size "
                "as each loop's own; its answers are noise, so only the speed compares.")  # fmt: skip
TRAINING_NOTE = ("One client's batches of 10 at the real shape. The official loop is timed after "
                 "one warm-up step and generates answers every batch as `fl_train` does; the "
                 "kit's rows count their first step, warm-up included, so they are a floor of "
                 "its speed, not a measure of it.")  # fmt: skip


def _summary(run: Path) -> dict[str, Any]:
    return json.loads((run / "gpucheck.json").read_text())


def _result(run: Path, step: str) -> dict[str, Any] | None:
    """A step's result: from ``gpucheck.json``, or its own ``STEP.json`` where the summary
    holds none (a step that failed after writing it)."""
    entry = _summary(run)["steps"].get(step, {})
    if "result" in entry:
        return entry["result"]
    own = run / f"{step}.json"
    return json.loads(own.read_text()) if own.is_file() else None


def _gib(value: float | None) -> str:
    return "" if value is None else f"{value / GIB:.2f} GiB"


def steps_table(runs: Sequence[Path]) -> tuple[list[Column], list[dict[str, Any]]]:
    """Each call's steps with their status and seconds."""
    columns = [number("call", "call", "int"), text("step", "step"), text("status", "status"),
               number("seconds", "seconds", ".1f")]  # fmt: skip
    rows = [{"call": index, "step": name, "status": entry["status"], "seconds": entry["seconds"]}
            for index, run in enumerate(runs, 1)
            for name, entry in _summary(run)["steps"].items()]  # fmt: skip
    return columns, rows


def junit_outcomes(report: Path) -> dict[str, str]:
    """Each test of a JUnit report: ``passed``, or the first line of its failure."""
    outcomes = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        if not case.get("name"):  # the entry of a run its time limit stopped
            continue
        failure = case.find("failure")
        failure = case.find("error") if failure is None else failure
        if failure is None:
            outcome = "skipped" if case.find("skipped") is not None else "passed"
        else:
            outcome = (failure.get("message") or "failed").splitlines()[0][:90]
        outcomes[case.get("name", "")] = outcome
    return outcomes


def tests_table(runs: Sequence[Path]) -> tuple[list[Column], list[dict[str, Any]]]:
    """Each test marked ``cuda`` and its outcome per call (``not reached``: the step's time
    limit ended the run first)."""
    reports = [junit_outcomes(run / "tests.xml") if (run / "tests.xml").is_file() else {}
               for run in runs]  # fmt: skip
    names = sorted({name for report in reports for name in report})
    columns = [text("test", "test")] + [text(f"call_{i}", f"call {i}")
                                        for i in range(1, len(runs) + 1)]  # fmt: skip
    rows = []
    for name in names:
        label = name.replace(PRESET_TEST, "preset round")
        row: dict[str, Any] = {"test": label}
        for index, report in enumerate(reports, 1):
            row[f"call_{index}"] = report.get(name, "not reached")
        rows.append(row)
    return columns, rows


def scoring_table(run: Path) -> tuple[list[Column], list[dict[str, Any]]]:
    """The official eval loop and the kit's prediction loop on the same test split."""
    result = _result(run, "scoring_throughput") or {}
    columns = [text("loop", "loop"), number("questions", "questions", "int"),
               number("seconds", "seconds", ".1f"), number("per_second", "questions/s", ".1f"),
               number("speedup", "against official", ".2fx"),
               text("peak", "peak GPU memory", align="right")]  # fmt: skip
    official = result.get("official", {})
    rows = [{"loop": "official `eval.py` (transformers 4.27.2), fp32",
             "questions": official.get("questions"), "seconds": official.get("seconds"),
             "per_second": official.get("questions_per_second"), "speedup": 1.0,
             "peak": _gib(official.get("peak_memory_bytes"))}]  # fmt: skip
    for row in result.get("kit", []):
        rows.append({"loop": f"kit, {row['precision']}", "questions": row["questions"],
                     "seconds": row["seconds"], "per_second": row["questions_per_second"],
                     "speedup": row.get("speedup_over_official"),
                     "peak": f"{row['peak_gpu_mib'] / 1024:.2f} GiB"})  # fmt: skip
    return columns, rows


def training_table(run: Path) -> tuple[list[Column], list[dict[str, Any]]]:
    """One client's training at the real shape, batch size 10: the official loop, the real-size
    steps and the 24 GB settings."""
    columns = [text("loop", "loop"), text("setting", "setting"),
               number("steps", "steps", "int"),
               number("per_second", "examples/s", ".2f"),
               text("peak", "peak GPU memory", align="right"),
               text("fits", "fits 24 GB")]  # fmt: skip
    rows = []
    official = run / "official_train.json"
    if official.is_file():
        theirs = json.loads(official.read_text())
        rows.append({"loop": "official `fl_train` (generates answers every batch)",
                     "setting": "fp32", "steps": theirs["timed_steps"],
                     "per_second": theirs["examples_per_second"],
                     "peak": _gib(theirs["peak_memory_bytes"]),
                     "fits": "yes" if theirs["peak_memory_bytes"] <= 24 * GIB else "no"})  # fmt: skip
    for step, label in (("real_size_steps", "kit, one step, untimed warm-up included"),
                        ("memory_24gb", "kit, two steps, warm-up included")):  # fmt: skip
        for row in (_result(run, step) or {}).get("rows", []):
            peak = row.get("peak_memory_bytes")
            rows.append({"loop": f"{label} ({row['preset']})", "setting": row["setting"],
                         "steps": int(row["steps"]), "per_second": row.get("examples_per_second"),
                         "peak": _gib(peak),
                         "fits": "" if peak is None else ("yes" if peak <= 24 * GIB else "no")})  # fmt: skip
    return columns, rows


def round_table(run: Path) -> tuple[list[Column], list[dict[str, Any]]]:
    """One whole round through ``pflkit train``: where its wall time went."""
    columns = [text("preset", "preset"), number("process", "process s", ".1f"),
               number("setup", "setup s", ".1f"), number("training", "client training s", ".1f"),
               number("evaluation", "evaluation s", ".2f"),
               number("rest", "aggregation, encoding, logging s", ".1f"),
               number("bytes", "round bytes", "int"), text("failed", "failed")]  # fmt: skip
    rows = []
    for row in (_result(run, "round") or {}).get("rows", []):
        if "failed" in row:
            rows.append({"preset": row["preset"], "process": None, "setup": None,
                         "training": None, "evaluation": None, "rest": None, "bytes": None,
                         "failed": row["failed"].strip().splitlines()[-1][:120]})  # fmt: skip
            continue
        rows.append({"preset": row["preset"], "process": row["process_seconds"],
                     "setup": row["setup_seconds"], "training": row["client_training_seconds"],
                     "evaluation": row["evaluation_seconds"],
                     "rest": row["aggregation_encoding_logging_seconds"],
                     "bytes": row["round_bytes"], "failed": ""})  # fmt: skip
    return columns, rows


def write_tables(runs: Sequence[Path], out: Path, *, date: str, machine: str,
                 versions: dict[str, str], command: str) -> list[Path]:  # fmt: skip
    """Every table of the module docstring; the per-run tables from the first call's folder."""
    tables = {
        "gpu_check_steps.json": (steps_table(runs), None),
        "gpu_check_tests.json": (tests_table(runs), TESTS_NOTE),
        "gpu_check_scoring.json": (scoring_table(runs[0]), SCORING_NOTE),
        "gpu_check_training.json": (training_table(runs[0]), TRAINING_NOTE),
        "gpu_check_round.json": (round_table(runs[0]), None),
    }
    return [write_results_table(out / name, columns, rows, command=command, date=date,
                                machine=machine, versions=versions, note=note)
            for name, ((columns, rows), note) in tables.items()]  # fmt: skip


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(prog="python -m bench.gpucheck_tables",
                                     description=__doc__.splitlines()[0])  # fmt: skip
    parser.add_argument("--run", type=Path, action="append", required=True,
                        help="a GPU check output folder (gpucheck.json, tests.xml); in order")
    parser.add_argument("--out", type=Path, required=True, help="the data folder")
    parser.add_argument("--date", required=True, help="ISO date of the calls")
    parser.add_argument("--machine", required=True, help="the lent machine, in words")
    parser.add_argument("--command", default="make gpu-check (bash bench/gpu_check.sh OUT_DIR)")
    args = parser.parse_args(argv)
    environment = _result(args.run[0], "environment") or {}
    versions = {name: version for name, version in environment.get("packages", {}).items()
                if version}  # fmt: skip
    if environment.get("torch_cuda"):
        versions["CUDA"] = environment["torch_cuda"]
    for path in write_tables(args.run, args.out, date=args.date, machine=args.machine,
                             versions=versions, command=args.command):  # fmt: skip
        print(path)


if __name__ == "__main__":
    main()
