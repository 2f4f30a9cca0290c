"""The experiments driver: real `pflkit train` and `pflkit evaluate` processes on `tiny` data."""

from __future__ import annotations

import json
from pathlib import Path

from baselines.experiments import Experiment, full_val_report, run_experiment, track2_table
from benchmark.data import load_split


def test_a_run_is_trained_once_and_scored_on_the_whole_val_split(tiny_data: Path,
                                                                 tiny_base: Path,
                                                                 tmp_path: Path) -> None:
    experiment = Experiment("fedavg", "fedavg", ("--rounds", "1"))
    run = run_experiment(experiment, tiny_data, tmp_path, str(tiny_base), val_limit=2)
    scores = json.loads((run / "val.json").read_text())
    assert scores["n"] == len(load_split(tiny_data, "val"))  # not the 2 of --val-limit
    assert json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])["round"] == 1

    stamp = (run / "submission.json").stat().st_mtime_ns
    assert run_experiment(experiment, tiny_data, tmp_path, str(tiny_base), val_limit=2) == run
    assert (run / "submission.json").stat().st_mtime_ns == stamp  # kept, not retrained

    report = full_val_report(run)
    assert report.val_anls == scores["anls"]
    table = track2_table(tmp_path, report)
    assert "| `dp-fedavg` | n/a | n/a | n/a | |" in table
    assert table.rstrip().endswith(f"{scores['anls']:.4f} |")
