"""The experiments driver: real `pflkit train` and `pflkit evaluate` processes on `tiny` data."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from benchmark.data import load_split
from experiments.catalog import Experiment
from experiments.runner import run_experiment
from experiments.scoring import full_val_report
from experiments.tables import track2_table


def test_a_run_is_trained_once_and_scored_on_the_whole_val_split(
    tiny_data: Path, tiny_base: Path, tmp_path: Path
) -> None:
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
    assert [column.key for column in table.columns] == [
        "method", "epsilon_1", "epsilon_4", "epsilon_8", "non_private"
    ]  # fmt: skip
    no_runs = {"epsilon_1": "n/a", "epsilon_4": "n/a", "epsilon_8": "n/a", "non_private": ""}
    assert table.rows[0] == {"method": "dp-fedavg", **no_runs}
    assert table.rows[-1] == {
        "method": "fedavg", "epsilon_1": "", "epsilon_4": "", "epsilon_8": "",
        "non_private": scores["anls"],
    }  # fmt: skip
    written = json.loads(table.write(tmp_path / "track2.json", command="test").read_text())
    assert written["rows"] == table.rows and written["command"] == "test"


@pytest.mark.slow  # about 2 minutes: five trainings and four scorings as processes
def test_round_by_round_checkpoints_are_those_of_one_run(
    tiny_data: Path, tiny_base: Path, tmp_path: Path
) -> None:
    from safetensors.torch import load_file

    from experiments.round_scores import (
        bytes_through,
        first_at_threshold,
        snapshot_checkpoint,
        train_round_by_round,
    )

    scores = train_round_by_round(tmp_path / "by-round", "fedavg", 2, tiny_data, str(tiny_base))
    assert [score.round for score in scores] == [1, 2]
    assert scores[0].total_bytes * 2 == scores[1].total_bytes  # every round sends the same
    assert all(0.0 <= s.val_anls <= 1.0 and 0.0 <= s.test_anls <= 1.0 for s in scores)
    whole = run_experiment(
        Experiment("straight", "fedavg", ("--rounds", "2")),
        tiny_data,
        tmp_path,
        str(tiny_base),
        val_limit=0,
    )
    resumed = load_file(tmp_path / "by-round" / "checkpoint" / "model.safetensors")
    straight = load_file(whole / "checkpoint" / "model.safetensors")
    assert resumed.keys() == straight.keys()
    assert all(torch.equal(resumed[name], straight[name]) for name in resumed)
    (whole / "snapshots").mkdir()
    shutil.copy(
        whole / "state" / "round-0002" / "global.safetensors",
        whole / "snapshots" / "round-0002.safetensors",
    )
    rebuilt = load_file(snapshot_checkpoint(whole, 2, str(tiny_base)) / "model.safetensors")
    assert all(torch.equal(rebuilt[name], straight[name]) for name in straight)
    assert bytes_through(whole, 2) == scores[1].total_bytes
    assert bytes_through(whole, 1) == scores[0].total_bytes
    assert first_at_threshold(scores, 1.01) is None
    assert first_at_threshold(scores, 0.0) == scores[0]


def test_only_selects_track_3_runs_by_short_name() -> None:
    from experiments.catalog import TRACK3, selected

    chosen = selected(TRACK3, "pfedcr, lora-10rounds")
    assert [e.name for e in chosen] == ["track3-pfedcr-seed0", "track3-lora-10rounds-seed0"]
    assert chosen[1].preset == "lora" and chosen[1].options == ("--rounds", "10")
    assert selected(TRACK3, None) == TRACK3
    with pytest.raises(ValueError, match="no such experiment"):
        selected(TRACK3, "pfedcr,fedavg")


def test_the_base_is_scored_once_into_its_file(
    tiny_data: Path, tiny_base: Path, tmp_path: Path
) -> None:
    from experiments.scoring import score_split

    target = tmp_path / "base" / "val.json"
    anls = score_split(str(tiny_base), tiny_data, target)
    scores = json.loads(target.read_text())
    assert scores["anls"] == anls and scores["n"] == len(load_split(tiny_data, "val"))
    assert [path.name for path in target.parent.iterdir()] == ["val.json"]  # no staging left
    target.write_text(json.dumps({**scores, "anls": 0.125}))
    assert score_split(str(tiny_base), tiny_data, target) == 0.125  # read, not re-scored
    with pytest.raises(RuntimeError, match="scoring failed"):
        score_split(str(tmp_path / "missing"), tiny_data, tmp_path / "missing.json")
    assert not (tmp_path / "missing.json").exists()


def test_every_dp_scale_run_is_labelled_with_its_own_options() -> None:
    from experiments.catalog import DP_SCALE, DP_SCALE_CLIPPING, DP_SCALE_SEEDS
    from experiments.dp_scale_report import CLIPPING_ROWS

    every = (*DP_SCALE, *DP_SCALE_CLIPPING)
    for experiment in every:
        options = experiment.options
        seed = int(options[options.index("--seed") + 1]) if "--seed" in options else 0
        assert experiment.seed == seed and experiment.name.endswith(f"-seed{seed}")
        if experiment.budget.startswith("eps"):
            epsilon = experiment.budget[3:].split("-")[0]
            assert options[options.index("--epsilon") + 1] == epsilon
        else:
            assert "--epsilon" not in options
    labels = {(e.preset, e.budget, e.seed) for e in every}
    assert len(labels) == len(every) == len({e.name for e in every})
    assert {e.seed for e in DP_SCALE if e.budget == "eps1"} == set(DP_SCALE_SEEDS)
    # the clipping runs differ from the preset's epsilon-8 runs by the option their row names
    assert {e.budget for e in DP_SCALE_CLIPPING} < set(CLIPPING_ROWS)
    for experiment in DP_SCALE_CLIPPING:
        option = "--clipping-norm" if "clip" in experiment.budget else "--lr"
        shown = f"`{option} {options_value(experiment.options, option)}`"
        assert shown in CLIPPING_ROWS[experiment.budget]


def options_value(options: tuple[str, ...], name: str) -> str:
    return options[options.index(name) + 1]


def test_the_rounds_to_the_threshold_count_to_the_benchmarks_threshold(tmp_path: Path) -> None:
    """The optimiser table's rounds to the threshold use the benchmark's stated threshold (the
    one the evaluator applies), and fedavg's own only for a benchmark that states none."""
    from experiments.tables import optimiser_track1

    def scored_run(name: str, tests: list[float]) -> None:
        run = tmp_path / name
        (run / "rounds").mkdir(parents=True)
        for round_, test in enumerate(tests, start=1):
            (run / "rounds" / f"{round_}.json").write_text(
                json.dumps(
                    {
                        "round": round_,
                        "total_bytes": 1000 * round_,
                        "val_anls": test,
                        "test_anls": test,
                    }
                )
            )
        (run / "submission.json").write_text(
            json.dumps(
                {
                    "method": "full",
                    "rounds": len(tests),
                    "clients_per_round": 2,
                    "bytes_per_message": 250,
                    "total_bytes": 1000 * len(tests),
                    "timing": {"wall": 10.0, "client_training": 8.0},
                }
            )
        )
        (run / "metrics.jsonl").write_text("")

    def row(reached: int) -> dict:
        return {
            "run": "fedshampoo-lr2e-2", "val_anls_per_round": "0.3500, 0.4100, 0.4200",
            "test_anls_per_round": "0.3500, 0.4100, 0.4200", "final_val": 0.42, "final_test": 0.42, "bytes_per_message": 250,
            "total_bytes": "3.00 kB", "round_at_threshold": reached,
            "bytes_to_threshold": f"{reached}.00 kB",
        }  # fmt: skip

    scored_run("fedshampoo-lr2e-2", [0.35, 0.41, 0.42])
    table, _ = optimiser_track1(tmp_path, 0.40)
    assert table.note is not None and table.note.startswith("threshold: 0.4 (the benchmark's")
    assert table.rows == [row(2)]

    scored_run("fedavg", [0.30, 0.44])  # 95% of 0.44 = 0.418: fedshampoo reaches it at round 3
    table, _ = optimiser_track1(tmp_path, 0.40)
    assert table.note is not None and table.note.startswith("threshold: 0.4 (the benchmark's")
    assert row(2) in table.rows
    table, _ = optimiser_track1(tmp_path, None)
    assert table.note is not None and table.note.startswith("threshold: 0.418 (95% of fedavg's")
    assert row(3) in table.rows
