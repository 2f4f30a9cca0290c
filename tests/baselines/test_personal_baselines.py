"""Track-3 baselines: `local-only` and `fedavg-ft` write valid track-3 run directories, log
every message of the personalisation, and resume without losing a client's personal state."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file

from baselines.cli import train
from baselines.config import TrainConfig
from baselines.engine.simulation import FederatedSimulation
from baselines.methods.finetune import LocalFineTuning
from baselines.presets import PERSONAL_PRESETS, PRESETS
from baselines.run_directory import RunDirectory
from benchmark.model import (
    expected_tensor_spec,
    load_model,
    personalised,
    read_checkpoint_config,
    read_personalisations,
)
from tests.baselines.toy import toy_task

K = 10


def _train(args: list[str]):
    return CliRunner().invoke(train, [*args, "--no-progress"], catch_exceptions=False)


@pytest.fixture(scope="module")
def personal_runs(tmp_path_factory, tiny_data: Path, tiny_base: Path) -> dict[str, Path]:
    runs = {}
    for name, extra in (
        ("fedavg-ft", ["--rounds", "1"]),
        ("local-only", []),
        ("fedavg-ft-0", ["--rounds", "1", "--finetune-epochs", "0"]),
    ):
        out = tmp_path_factory.mktemp("runs") / name
        preset = name.removesuffix("-0")
        result = _train(
            [
                "--preset",
                preset,
                "--data",
                str(tiny_data),
                "--out",
                str(out),
                "--base",
                str(tiny_base),
                "--finetune-epochs",
                "1",
                "--val-limit",
                "4",
                *extra,
            ]
        )
        assert result.exit_code == 0, result.output
        runs[name] = out
    return runs


def _log(run: Path) -> list[list[int]]:
    with (run / "communication_log.csv").open() as stream:
        rows = list(csv.reader(stream))
    assert rows[0] == ["federated_round", "sender", "receiver", "amount_of_bytes"]
    return [[int(v) for v in row] for row in rows[1:]]


def test_presets_are_track_3_only() -> None:
    assert set(PERSONAL_PRESETS) == {"fedavg-ft", "local-only", "pfedcr", "feddat", "fedp3"}
    assert not set(PERSONAL_PRESETS) & set(PRESETS)
    assert PERSONAL_PRESETS["local-only"]["rounds"] == 0
    with pytest.raises(ValueError, match="rounds must be >= 1"):
        TrainConfig(method="full", rounds=0)


@pytest.mark.parametrize("name", ["fedavg-ft", "local-only", "fedavg-ft-0"])
def test_a_run_is_a_valid_track_3_submission(name: str, personal_runs, tiny_base: Path) -> None:
    run = personal_runs[name]
    submission = json.loads((run / "submission.json").read_text())
    assert submission["track"] == 3 and submission["clients"] == K
    config = read_checkpoint_config(run / "checkpoint")
    personal = read_personalisations(run / "personal", expected_tensor_spec(config), K)
    global_tensors = load_file(run / "checkpoint" / "model.safetensors")
    fine_tuned = name != "fedavg-ft-0"
    assert submission["personal"]["personalised_clients"] == (K if fine_tuned else 0)
    assert submission["personal"]["bytes"] == personal.total_bytes
    for client in range(K):
        tensors = personal.load(client)
        assert bool(tensors) == fine_tuned
        # only tensors that differ from the checkpoint, never the frozen visual encoder
        assert all(not torch.equal(value, global_tensors[n]) for n, value in tensors.items())
        assert not any(n.startswith("visual_embedding.image_model.") for n in tensors)
    if name == "local-only":  # no federation: the global model is the base
        base = load_file(tiny_base / "model.safetensors")
        assert all(torch.equal(base[n], global_tensors[n]) for n in base)


def test_the_log_covers_the_personalisation(personal_runs) -> None:
    log = _log(personal_runs["fedavg-ft"])
    first = [row for row in log if row[0] == 1]
    last = [row for row in log if row[0] == 2]
    assert len(first) == 2 * 2 and len(log) == len(first) + len(last)
    # the final global model goes down to every client; nothing comes back up
    assert sorted(row[2] for row in last) == list(range(K))
    assert all(row[1] == -1 and row[3] == first[0][3] for row in last)
    submission = json.loads((personal_runs["fedavg-ft"] / "submission.json").read_text())
    assert submission["total_bytes"] == sum(row[3] for row in log)
    assert submission["rounds"] == 1 and submission["messages"] == len(log)
    assert submission["personal"]["log_round"] == 2
    assert _log(personal_runs["local-only"]) == []
    local = json.loads((personal_runs["local-only"] / "submission.json").read_text())
    assert local["total_bytes"] == 0 and local["rounds"] == 0
    assert local["personal"]["log_round"] is None
    assert [row[0] for row in _log(personal_runs["fedavg-ft-0"])] == [1, 1, 1, 1]


def test_a_client_file_is_its_personal_model(personal_runs) -> None:
    run = personal_runs["fedavg-ft"]
    model = load_model(run / "checkpoint")
    personal = read_personalisations(run / "personal", expected_tensor_spec(model.config), K)
    state = load_file(next((run / "state").glob("round-*")) / "clients.safetensors")
    name = "language_backbone.shared.weight"
    with personalised(model, personal.load(3)):
        assert torch.equal(model.language_backbone.shared.weight, state[f"3/{name}"])


class Interrupted(Exception):
    pass


class InterruptedFineTuning(LocalFineTuning):
    """Fine-tuning that stops the run at the first attempt on one client and counts calls."""

    def __init__(self, stop_at: int | None) -> None:
        super().__init__(frozen=(), epochs=2)
        self.stop_at = stop_at
        self.calls: list[int] = []

    def personalise(self, job) -> None:
        if job.client == self.stop_at:
            self.stop_at = None
            raise Interrupted
        self.calls.append(job.client)
        super().personalise(job)


CONFIG = TrainConfig(
    method="finetune",
    rounds=2,
    clients_per_round=2,
    batch_size=8,
    val_limit=0,
    options={"lr": 0.05, "frozen": (), "finetune_epochs": 2},
)


def _simulation(run: Path, method: LocalFineTuning, rounds: int = 2) -> FederatedSimulation:
    return FederatedSimulation(
        CONFIG.replace(rounds=rounds),
        toy_task(clients=4),
        RunDirectory(run),
        progress=False,
        method=method,
    )


def test_resume_in_the_personalisation_keeps_the_clients_done(tmp_path: Path) -> None:
    whole = _simulation(tmp_path / "whole", InterruptedFineTuning(stop_at=None))
    whole.run()
    method = InterruptedFineTuning(stop_at=2)
    with pytest.raises(Interrupted):
        _simulation(tmp_path / "parts", method).run()
    assert method.calls == [0, 1]
    saved = RunDirectory(tmp_path / "parts").load_state()
    assert saved.personalised == [0, 1] and set(saved.client_states) >= {0, 1}
    resumed_method = InterruptedFineTuning(stop_at=None)
    resumed = _simulation(tmp_path / "parts", resumed_method)
    resumed.run(resume=True)
    assert resumed_method.calls == [2, 3]  # clients 0 and 1 kept their state, not redone
    for client, tensors in whole.client_states.items():
        assert tensors and all(
            torch.equal(tensors[n], resumed.client_states[client][n]) for n in tensors
        )
    for client in range(4):
        a = load_file(tmp_path / "whole" / "personal" / f"client_{client}.safetensors")
        b = load_file(tmp_path / "parts" / "personal" / f"client_{client}.safetensors")
        assert a.keys() == b.keys() and a and all(torch.equal(a[n], b[n]) for n in a)
    assert (tmp_path / "whole" / "communication_log.jsonl").read_text() == (
        tmp_path / "parts" / "communication_log.jsonl"
    ).read_text()
    with pytest.raises(ValueError, match="cannot add rounds"):
        _simulation(tmp_path / "parts", InterruptedFineTuning(None), rounds=3).run(resume=True)


def test_personal_models_beat_the_global_one_on_their_own_data(tmp_path: Path) -> None:
    simulation = _simulation(tmp_path / "run", InterruptedFineTuning(stop_at=None))
    simulation.run()
    task = toy_task(clients=4)

    def loss(model, client: int) -> float:
        batch = task.collate(list(task.client_data[client]))
        with torch.no_grad():
            return float(model(**batch).loss)

    for client in range(4):
        assert loss(simulation.personal_model(client), client) < loss(simulation.model, client)


def test_fedavg_ft_has_the_fedavg_global_model(
    personal_runs, tiny_data: Path, tiny_base: Path, tmp_path: Path
) -> None:
    """The fine-tuning comes after FedAvg's rounds: the global checkpoint is fedavg's, bit for
    bit (the README's `fedavg` track-3 row scores the fedavg-ft run's checkpoint)."""
    out = tmp_path / "fedavg"
    result = _train(
        [
            "--preset",
            "fedavg",
            "--data",
            str(tiny_data),
            "--out",
            str(out),
            "--base",
            str(tiny_base),
            "--rounds",
            "1",
            "--val-limit",
            "4",
        ]
    )
    assert result.exit_code == 0, result.output
    fedavg = load_file(out / "checkpoint" / "model.safetensors")
    fedavg_ft = load_file(personal_runs["fedavg-ft"] / "checkpoint" / "model.safetensors")
    assert fedavg.keys() == fedavg_ft.keys()
    assert all(torch.equal(fedavg[n], fedavg_ft[n]) for n in fedavg)
    log = _log(personal_runs["fedavg-ft"])
    assert [row for row in log if row[0] == 1] == _log(out)
