"""bench.loadtest adds a run's levels to the table of docs/results/data/load.json."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.loadtest import TABLE_COLUMNS, Tally, table_rows
from experiments.results_file import append_results_rows


def level(concurrency: int, latencies: dict[str, list[float]], ended: dict[str, int] | None,
          seconds: float) -> dict[str, Any]:  # fmt: skip
    """One level as ``--json`` prints it: the run's settings, then ``_measure``'s figures."""
    tallies = {name: Tally() for name in latencies}
    everything = Tally()
    for name, values in latencies.items():
        tallies[name].latencies = values
        everything.latencies += values
    requests = len(everything.latencies)
    return {"endpoints_asked": [], "worker": ended is not None, "uploaders": 2,
            "load_average": [5.08, 6.04], "concurrency": concurrency, "seconds": seconds,
            "requests_per_second": round(requests / seconds, 1), **everything.summary(),
            "endpoints": {name: tally.summary() for name, tally in tallies.items()},
            "uploads": dict(Counter(accepted=3)), "ended_meanwhile": ended}  # fmt: skip


def test_each_level_is_a_row_and_each_run_adds_its_levels(
    tmp_path: Path, committed: Callable[[str], dict[str, Any]],
    written: Callable[[Path], dict[str, Any]],
) -> None:  # fmt: skip
    fast = [0.05] * 51 + [0.2] * 44 + [1.5] * 5  # p50 50 ms, p95 200 ms, p99 1,500 ms
    run = [level(100, {"status": fast, "page": fast, "json": fast}, {"finished": 6}, 14.25),
           level(200, {"status": fast, "page": fast, "json": fast}, {"finished": 5, "failed": 2},
                 13.1)]  # fmt: skip
    path = tmp_path / "load.json"
    append_results_rows(path, TABLE_COLUMNS, table_rows(run, "before, run 1"), command="one")
    append_results_rows(path, TABLE_COLUMNS, table_rows(run[:1], "after, run 1"), command="two")
    data = written(path)
    assert data["columns"] == committed("load.json")["columns"]
    first, second, third = data["rows"]
    assert first == {"run_load_average": "before, run 1 (5.1 to 6.0)", "readers": 100,
                     "req_s": 21, "all": "50 / 200 / 1,500", "status": "50 / 200 / 1,500",
                     "page": "50 / 200 / 1,500", "json": "50 / 200 / 1,500",
                     "scored": "6 in 14.2 s"}  # fmt: skip
    assert second["run_load_average"] == "" and second["scored"] == "7 in 13.1 s"
    assert third["run_load_average"] == "after, run 1 (5.1 to 6.0)"


def test_an_endpoint_not_asked_and_no_worker_leave_their_cells_empty() -> None:
    (row,) = table_rows([level(32, {"status": [0.01, 0.02, 0.03]}, None, 1.0)], "")
    assert row["run_load_average"] == "(5.1 to 6.0)"
    assert row["status"] == row["all"] == "20 / 20 / 20"
    assert row["page"] == row["json"] == row["scored"] == ""
