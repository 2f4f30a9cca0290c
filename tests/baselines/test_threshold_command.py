"""`pflkit data threshold`: 95% of a real FedAvg run's test ANLS, stored in benchmark.json."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from baselines.cli import train
from benchmark.evaluation.cli import evaluate, threshold


@pytest.fixture(scope="module")
def fedavg_run(tiny_data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A copy of the tiny benchmark and one fedavg round on it from the shipped base."""
    root = tmp_path_factory.mktemp("threshold")
    data = root / "data"
    shutil.copytree(tiny_data, data)
    run = root / "fedavg"
    # From the shipped base, so that the test ANLS is not zero and the 95% is visible.
    trained = CliRunner().invoke(train, [
        "--method", "fedavg", "--data", str(data), "--out", str(run), "--rounds", "1",
        "--val-limit", "4", "--no-progress"], catch_exceptions=False)
    assert trained.exit_code == 0, trained.output
    return data, run


def test_threshold_at_or_below_the_base_is_refused(fedavg_run: tuple[Path, Path]) -> None:
    """Issue 36: one fedavg round from the shipped base barely moves it, so 95% of its test ANLS
    is below the base's own: the untouched base would rank first in track 1. Refused, nothing
    written."""
    data, run = fedavg_run
    before = (data / "benchmark.json").read_bytes()
    result = CliRunner().invoke(threshold, [str(data), "--run", str(run), "--json"])
    assert result.exit_code != 0
    assert "at or below the base model's own test ANLS" in result.output
    assert "nothing was written" in result.output
    scored = CliRunner().invoke(evaluate, [str(run / "checkpoint"), "--data", str(data),
                                           "--split", "test", "--json"])
    assert f"{round(0.95 * json.loads(scored.stdout)['anls'], 4):.4f}" in result.output
    assert (data / "benchmark.json").read_bytes() == before


def test_threshold_is_95_percent_of_the_fedavg_runs_test_anls(
    fedavg_run: tuple[Path, Path], tiny_base: Path, tmp_path: Path
) -> None:
    """The run names the base it started from (``config.json``); the threshold is compared with
    that base's test ANLS. Here the run says it started from a randomly initialised model,
    whose answers score far below the trained checkpoint's, so the threshold is stored."""
    data_source, trained_run = fedavg_run
    data = tmp_path / "data"
    shutil.copytree(data_source, data)
    run = tmp_path / "fedavg"
    shutil.copytree(trained_run, run)
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**config, "base": str(tiny_base)}))

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
    source = summary["track1_threshold_source"]
    assert source["run"] == str(run) and source["base"] == str(tiny_base)
    assert source["base_test_anls"] < summary["track1_threshold"]
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
