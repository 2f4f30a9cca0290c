"""The GPU check's tables on docs/results/gpu.md are what `bench.gpucheck_tables` writes from the
check's own output files, committed beside them (docs/results/gpucheck_h200/)."""

from __future__ import annotations

import json
from pathlib import Path

from bench.gpucheck_tables import junit_outcomes, write_tables

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
CALLS = [RESULTS / "gpucheck_h200" / "call1", RESULTS / "gpucheck_h200" / "call2"]
TABLES = ("steps", "tests", "scoring", "training", "round")


def test_the_committed_tables_are_written_again_from_the_committed_outputs(tmp_path: Path) -> None:
    committed = {name: json.loads((RESULTS / "data" / f"gpu_check_{name}.json").read_text())
                 for name in TABLES}  # fmt: skip
    first = committed["steps"]
    write_tables(CALLS, tmp_path, date=first["date"], machine=first["machine"],
                 versions=first["versions"], command=first["command"])  # fmt: skip
    for name, data in committed.items():
        again = json.loads((tmp_path / f"gpu_check_{name}.json").read_text())
        assert again["columns"] == data["columns"] and again["rows"] == data["rows"], name


def test_the_scoring_speedups_are_the_loops_own_ratio() -> None:
    rows = json.loads((RESULTS / "data" / "gpu_check_scoring.json").read_text())["rows"]
    official, *kit = rows
    assert official["speedup"] == 1.0 and len(kit) == 2
    for row in kit:
        assert abs(row["speedup"] - row["per_second"] / official["per_second"]) < 0.01


def test_a_test_that_the_time_limit_cut_off_is_not_a_row_and_reads_not_reached(tmp_path) -> None:
    report = tmp_path / "tests.xml"
    report.write_text(
        '<testsuites><testsuite tests="3">'
        '<testcase name="a[x]" time="1"/>'
        '<testcase name="b[y]" time="1"><failure message="AssertionError: far&#10;more"/></testcase>'
        '<testcase time="0.002"/>'
        "</testsuite></testsuites>"
    )
    assert junit_outcomes(report) == {"a[x]": "passed", "b[y]": "AssertionError: far"}
    rows = json.loads((RESULTS / "data" / "gpu_check_tests.json").read_text())["rows"]
    by_test = {row["test"]: row for row in rows}
    assert by_test["preset round[pfedcr]"]["call_2"] == "not reached"
    assert "" not in by_test
