"""One round of federated self-pretraining then one of fine-tuning on `tiny`: one log with the
pre-training round first, a base-architecture submission, and the evaluator's log validation
accepting it while refusing malformed variants."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from safetensors import safe_open

from baselines.cli import train
from baselines.fsp.vocabulary import LOCATION_BINS, MAX_MASKED, SENTINEL_KINDS
from baselines.strategies import STRATEGIES, StrategyOptions
from benchmark.tracks import get_track
from evaluator.submission_metadata import SubmissionMetadata
from evaluator.validation.commlog import declared_shape, parse_log
from evaluator.validation.errors import InvalidSubmission

ADDED = len(SENTINEL_KINDS) * MAX_MASKED + LOCATION_BINS
OPTIONS = (
    "--fsp-rounds",
    "1",
    "--fsp-clients-per-round",
    "2",
    "--rounds",
    "1",
    "--clients-per-round",
    "1",
    "--val-limit",
    "2",
    "--threads",
    "1",
    "--no-progress",
)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, tiny_data: Path, tiny_base: Path) -> Path:
    out = tmp_path_factory.mktemp("fsp") / "run"
    result = CliRunner().invoke(
        train,
        [
            "--preset",
            "fsp-fedadam",
            "--data",
            str(tiny_data),
            "--out",
            str(out),
            "--base",
            str(tiny_base),
            *OPTIONS,
        ],
    )
    assert result.exit_code == 0, result.output
    return out


def rows(run: Path) -> list[tuple[int, int, int, int]]:
    with open(run / "communication_log.csv", newline="") as handle:
        return [tuple(int(v) for v in row.values()) for row in csv.DictReader(handle)]


def spec(path: Path) -> dict[str, tuple]:
    with safe_open(str(path), framework="pt") as handle:
        return {
            name: (tuple(handle.get_slice(name).get_shape()), handle.get_slice(name).get_dtype())
            for name in handle.keys()
        }  # noqa: SIM118


def test_the_log_holds_the_pretraining_round_then_the_fine_tuning_round(run: Path) -> None:
    log = rows(run)
    assert [r[0] for r in log] == [1, 1, 1, 1, 2, 2]
    pre, fine = {r[3] for r in log if r[0] == 1}, {r[3] for r in log if r[0] == 2}
    (details,) = {
        tuple(json.loads(line)["parameters"])
        for line in (run / "communication_log.jsonl").read_text().splitlines()
    }
    assert "language_backbone.shared.weight" in details  # the same tensors in both phases
    width = json.loads((run / "checkpoint" / "config.json").read_text())["language_config"][
        "d_model"
    ]
    assert len(pre) == len(fine) == 1 and pre.pop() - fine.pop() == 4 * ADDED * width
    submission = json.loads((run / "submission.json").read_text())
    assert submission["total_bytes"] == sum(r[3] for r in log)
    assert submission["rounds"] == 1 and submission["pretraining"] == {
        "rounds": 1,
        "clients_per_round": 2,
        "strategy": "fedadam",
        "server_lr": 1e-3,
        "lr": 2e-4,
        "objectives": ["tm", "lm", "tlm"],
        "log_rounds": [1, 1],
        "added_tokens": ADDED,
    }
    phase = json.loads((run / "pretraining" / "submission.json").read_text())
    assert phase["total_bytes"] == sum(r[3] for r in log if r[0] == 1)


def test_fine_tuning_samples_as_a_run_without_pretraining(run: Path, tiny_data: Path) -> None:
    (row,) = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    strategy = STRATEGIES["fedavg"](StrategyOptions(clients_per_round=1))
    assert row["round"] == 1 and row["log_round"] == 2
    assert row["clients"] == strategy.configure_fit(1, 10, seed=0)
    assert [r[1] for r in rows(run) if r[0] == 2 and r[1] >= 0] == row["clients"]


def test_the_submission_and_the_pretrained_checkpoint_have_the_base_architecture(
    run: Path, tiny_base: Path
) -> None:
    base = spec(tiny_base / "model.safetensors")
    assert spec(run / "checkpoint" / "model.safetensors") == base
    assert spec(run / "pretraining" / "checkpoint" / "model.safetensors") == base


def _parse(run: Path, metadata: dict, *, text: str | None = None, track: int = 1):  # type: ignore[no-untyped-def]
    path = run / "communication_log.csv"
    if text is not None:
        path = run.parent / "edited.csv"
        path.write_text(text)
    declared = SubmissionMetadata(**metadata)
    return parse_log(
        path,
        clients=10,
        max_bytes=10**6,
        max_rows=10**4,
        **declared_shape(declared, get_track(track)),
    )


def test_the_evaluator_accepts_the_log_and_counts_every_round(run: Path) -> None:
    metadata = json.loads((run / "submission.json").read_text())
    tally = _parse(run, metadata)
    assert tally.total_bytes == metadata["total_bytes"] == sum(r[3] for r in rows(run))
    assert [r.round for r in tally.rounds] == [1, 2]


def test_the_evaluator_refuses_malformed_pretraining_logs(run: Path) -> None:
    metadata = json.loads((run / "submission.json").read_text())
    lines = (run / "communication_log.csv").read_text().splitlines()
    header, pre, fine = lines[0], lines[1:5], lines[5:]
    cases = {
        # the pre-training messages left out of the log: fewer rounds than declared
        "rounds in all": ({**metadata}, "\n".join([header, *fine]) + "\n", 1),
        # a pre-training round with another number of clients than declared
        "per pre-training round": (
            {**metadata, "pretraining": {**metadata["pretraining"], "clients_per_round": 1}},
            None,
            1,
        ),
        # the phase not declared: its round counts as fine-tuning
        "declares 1": ({k: v for k, v in metadata.items() if k != "pretraining"}, None, 1),
        # fine-tuning messages logged before pre-training ones
        "in order": (metadata, "\n".join([header, *fine, *pre]) + "\n", 1),
        # track 2 takes no pre-training
        "track 2": ({**metadata, "track": 2}, None, 2),
    }
    for expected, (declared, text, track) in cases.items():
        with pytest.raises(InvalidSubmission, match=expected):
            _parse(run, declared, text=text, track=track)


def test_pretraining_refuses_a_method_that_does_not_send_the_embedding(
    tmp_path: Path, tiny_data: Path, tiny_base: Path
) -> None:
    result = CliRunner().invoke(
        train,
        [
            "--preset",
            "lora",
            "--data",
            str(tiny_data),
            "--out",
            str(tmp_path / "run"),
            "--base",
            str(tiny_base),
            *OPTIONS,
        ],
    )
    assert result.exit_code != 0 and "token embedding" in result.output


def test_the_experiments_select_score_and_tabulate_the_fsp_runs(
    run: Path, tiny_data: Path, tiny_base: Path
) -> None:
    from experiments.catalog import FSP, Experiment, selected
    from experiments.fsp_report import fsp_table, read_fsp_run
    from experiments.runner import run_experiment

    assert [e.name for e in selected(FSP, "fsp-tm,fedadam")] == ["fedadam", "fsp-tm"]
    with pytest.raises(ValueError, match="no such experiment"):
        selected(FSP, "fsp-unknown")
    # the run is finished, so the driver only scores it on the whole val split
    run_experiment(
        Experiment(run.name, "fsp-fedadam"), tiny_data, run.parent, str(tiny_base), val_limit=2
    )
    row = read_fsp_run(run)
    log = rows(run)
    assert (row.objectives, row.pretraining_strategy, row.strategy) == (
        ("tm", "lm", "tlm"),
        "fedadam",
        "fedavg",
    )
    assert (row.pretraining_rounds, row.rounds) == (1, 1)
    assert row.total_bytes == sum(r[3] for r in log)
    assert row.pretraining_bytes == sum(r[3] for r in log if r[0] == 1)
    assert row.val_anls == json.loads((run / "val.json").read_text())["anls"]
    shown = fsp_table([row]).rows[0]
    assert shown["run"] == "run" and shown["objectives"] == "tm+lm+tlm"
    assert (shown["fsp_server"], shown["server"], shown["fsp_rounds"], shown["rounds"]) == (
        "fedadam",
        "fedavg",
        1,
        1,
    )
    assert shown["val_anls"] == row.val_anls


def test_a_resumed_run_ends_as_a_straight_one(
    tmp_path: Path, tiny_data: Path, tiny_base: Path
) -> None:
    from safetensors.torch import load_file

    shape = (
        "--preset",
        "fsp-fedavg",
        "--fsp-rounds",
        "1",
        "--clients-per-round",
        "1",
        "--data",
        str(tiny_data),
        "--base",
        str(tiny_base),
        "--val-limit",
        "0",
        "--threads",
        "1",
        "--no-progress",
    )
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    for out, rounds in ((straight, "2"), (resumed, "1")):
        result = CliRunner().invoke(train, [*shape, "--out", str(out), "--rounds", rounds])
        assert result.exit_code == 0, result.output
    result = CliRunner().invoke(train, [*shape, "--out", str(resumed), "--rounds", "2", "--resume"])
    assert result.exit_code == 0, result.output
    assert rows(resumed) == rows(straight)
    assert [r[0] for r in rows(resumed)] == [1, 1, 2, 2, 3, 3]
    ours = load_file(resumed / "checkpoint" / "model.safetensors")
    theirs = load_file(straight / "checkpoint" / "model.safetensors")
    assert ours.keys() == theirs.keys()
    assert all(bool((ours[name] == theirs[name]).all()) for name in ours)
