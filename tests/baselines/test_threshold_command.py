"""`pflkit data threshold`: 95% of a real FedAvg run's test ANLS, stored in benchmark.json."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from baselines.cli import train
from benchmark.data.cli import threshold
from benchmark.evaluation.cli import evaluate


def test_threshold_is_95_percent_of_the_fedavg_runs_test_anls(tiny_data: Path,
                                                               tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(tiny_data, data)
    run = tmp_path / "fedavg"
    # From the shipped base, so that the test ANLS is not zero and the 95% is visible.
    trained = CliRunner().invoke(train, [
        "--method", "fedavg", "--data", str(data), "--out", str(run), "--rounds", "1",
        "--val-limit", "4", "--no-progress"], catch_exceptions=False)
    assert trained.exit_code == 0, trained.output

    result = CliRunner().invoke(threshold, [str(data), "--run", str(run), "--json"])
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)

    scored = CliRunner().invoke(evaluate, [str(run / "checkpoint"), "--data", str(data),
                                           "--split", "test", "--json"])
    test_anls = json.loads(scored.stdout)["anls"]
    assert test_anls > 0
    summary = json.loads((data / "benchmark.json").read_text())
    assert answer["fedavg_test_anls"] == test_anls
    assert summary["track1_threshold"] == answer["track1_threshold"] == round(0.95 * test_anls, 4)
    assert summary["track1_threshold_source"]["run"] == str(run)
    assert summary["track1_threshold_source"]["base"] == "base"
    assert summary["scale"] == "tiny"  # the rest of benchmark.json is kept


def test_threshold_refuses_a_run_that_is_not_fedavg(tiny_data: Path, tiny_base: Path,
                                                    tmp_path: Path) -> None:
    run = tmp_path / "lora"
    trained = CliRunner().invoke(train, [
        "--method", "lora", "--data", str(tiny_data), "--out", str(run), "--base",
        str(tiny_base), "--rounds", "1", "--val-limit", "4", "--no-progress"],
        catch_exceptions=False)
    assert trained.exit_code == 0, trained.output
    before = (tiny_data / "benchmark.json").read_bytes()
    result = CliRunner().invoke(threshold, [str(tiny_data), "--run", str(run)])
    assert result.exit_code != 0
    assert "'lora'" in result.output and "fedavg" in result.output
    assert (tiny_data / "benchmark.json").read_bytes() == before


def test_threshold_needs_a_generated_benchmark_directory(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "run").mkdir()
    result = CliRunner().invoke(threshold, [str(tmp_path / "data"), "--run", str(tmp_path / "run")])
    assert result.exit_code != 0
    assert "benchmark.json: missing" in result.output and "pflkit data generate" in result.output
