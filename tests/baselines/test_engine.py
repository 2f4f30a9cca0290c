"""The round loop: resume equals an uninterrupted run, client hooks, bad input before training."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file

from baselines.cli import train
from baselines.core.client_job import ClientJob
from baselines.core.client_update import ClientUpdate
from baselines.engine.document_task import build_task
from baselines.engine.simulation import FederatedSimulation
from baselines.methods import LoRA
from baselines.presets import preset_config
from baselines.run_directory import RunDirectory


@pytest.fixture(scope="module")
def task(tiny_data: Path, tiny_base: Path):
    return build_task(tiny_data, tiny_base, val_limit=0, progress=False)


def _global(run: Path) -> dict[str, torch.Tensor]:
    latest = json.loads((run / "state" / "latest.json").read_text())
    return load_file(run / "state" / latest["dir"] / "global.safetensors")


def _assert_same_run(a: Path, b: Path) -> None:
    assert (a / "communication_log.csv").read_text() == (b / "communication_log.csv").read_text()
    assert (a / "communication_log.jsonl").read_text() == (
        b / "communication_log.jsonl"
    ).read_text()
    first, second = _global(a), _global(b)
    assert first.keys() == second.keys()
    for name in first:
        assert torch.equal(first[name], second[name]), name
    ckpt_a = load_file(a / "checkpoint" / "model.safetensors")
    ckpt_b = load_file(b / "checkpoint" / "model.safetensors")
    assert all(torch.equal(ckpt_a[n], ckpt_b[n]) for n in ckpt_a)


def test_resume_continues_to_the_same_result(task, tmp_path: Path) -> None:
    config = preset_config("lora", rounds=2, local_epochs=1, strategy="fedadam", val_limit=0)
    whole = tmp_path / "whole"
    FederatedSimulation(config, task, RunDirectory(whole), progress=False).run()

    parts = tmp_path / "parts"
    FederatedSimulation(config.replace(rounds=1), task, RunDirectory(parts), progress=False).run()
    summary = FederatedSimulation(config, task, RunDirectory(parts), progress=False).run(
        resume=True
    )
    assert summary.rounds == 2 and [row["round"] for row in summary.metrics] == [1, 2]
    _assert_same_run(whole, parts)


def _evaluator(crash_at: int | None):
    """An evaluation that fails at its ``crash_at``-th call (an interruption inside a round)."""
    calls = []

    def evaluate(model):
        calls.append(1)
        if len(calls) == crash_at:
            raise RuntimeError("power cut")
        return {"anls": 0.0}

    return evaluate


def test_run_interrupted_inside_a_round_resumes_from_the_last_completed_round(
    task, tmp_path: Path
) -> None:
    config = preset_config("fedavg", rounds=2, val_limit=0, strategy="fedavgm")
    whole = tmp_path / "whole"
    FederatedSimulation(
        config,
        dataclasses.replace(task, evaluate=_evaluator(None)),
        RunDirectory(whole),
        progress=False,
    ).run()
    broken = tmp_path / "broken"
    crashing = dataclasses.replace(task, evaluate=_evaluator(crash_at=2))
    with pytest.raises(RuntimeError, match="power cut"):
        FederatedSimulation(config, crashing, RunDirectory(broken), progress=False).run()
    assert json.loads((broken / "state" / "latest.json").read_text())["round"] == 1
    assert not (broken / "checkpoint").exists()
    lines = (broken / "communication_log.csv").read_text().splitlines()
    assert {line.split(",")[0] for line in lines[1:]} == {"1"}
    FederatedSimulation(
        config,
        dataclasses.replace(task, evaluate=_evaluator(None)),
        RunDirectory(broken),
        progress=False,
    ).run(resume=True)
    _assert_same_run(whole, broken)


class PerProviderMean(LoRA):
    """A client rule of the DP-FedAvg shape: one update per provider from the same start."""

    calls: list[tuple[int, int, int]] = []

    def compute_update(self, job: ClientJob) -> ClientUpdate:
        deltas = []
        for provider, rows in job.indices_by_provider().items():
            assert provider
            job.reset()
            job.train(job.dataset.select(rows))
            deltas.append(job.delta())
            self.calls.append((job.federated_round, job.client, len(rows)))
        mean = {name: sum(d[name] for d in deltas) / len(deltas) for name in deltas[0]}
        return ClientUpdate(mean, num_examples=len(deltas))


def test_a_method_can_replace_the_client_update_without_touching_the_loop(task, tmp_path) -> None:
    config = preset_config("lora", rounds=1, local_epochs=1, val_limit=0)
    method = PerProviderMean()
    simulation = FederatedSimulation(
        config, task, RunDirectory(tmp_path / "run"), progress=False, method=method
    )
    summary = simulation.run()
    clients = summary.metrics[0]["clients"]
    assert {client for _, client, _ in method.calls} == set(clients)
    assert sum(rows for _, _, rows in method.calls) == sum(
        len(task.client_data[c]) for c in clients
    )
    assert summary.metrics[0]["examples"] == len(method.calls)


def test_lora_adapters_come_from_the_shared_seed_and_merge_exactly(tiny_base: Path, task) -> None:
    from benchmark.model import load_model

    def adapters(seed):
        model = LoRA().prepare(load_model(tiny_base), seed=seed)
        return model, {n: p.detach().clone() for n, p in model.named_parameters() if "lora_A" in n}

    model, first = adapters(0)
    _, again = adapters(0)
    _, other = adapters(1)
    assert first and all(torch.equal(first[n], again[n]) for n in first)
    assert not all(torch.equal(first[n], other[n]) for n in first)

    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 0.5)
    batch = task.collate(list(task.client_data[1].select(range(4))))
    method = LoRA()
    model.eval()
    with torch.no_grad():
        adapted = method.inference_model(model)(**batch).logits
        import copy

        merged = method.export(copy.deepcopy(model))
        assert type(merged).__name__ == "VT5ForConditionalGeneration"
        assert not any("lora" in name for name in merged.state_dict())
        assert torch.allclose(merged(**batch).logits, adapted, atol=1e-5)


# ---------------------------------------------------------------- bad input, before any training


def _cli(args: list[str]):
    return CliRunner().invoke(train, [*args, "--no-progress"])


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--method", "fedsgd"], "unknown method 'fedsgd'"),
        (["--method", "fedavg", "--strategy", "fedprox"], "unknown strategy 'fedprox'"),
        (["--method", "lora", "--clients-per-round", "11"], "exceeds the 10 clients"),
        (
            ["--method", "lora", "--lora-targets", "q,query"],
            "LoRA target 'query' matches no module",
        ),
        (["--method", "lora", "--rounds", "0"], "rounds must be >= 1"),
    ],
)
def test_bad_options_fail_before_training(extra, message, tiny_data, tiny_base, tmp_path) -> None:
    out = tmp_path / "run"
    result = _cli([*extra, "--data", str(tiny_data), "--out", str(out), "--base", str(tiny_base)])
    assert result.exit_code != 0
    assert message in result.output
    assert not (out / "state").exists() and not (out / "checkpoint").exists()


def test_data_without_the_needed_splits_fails_before_training(
    tiny_data, tiny_base, tmp_path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = _cli(
        [
            "--method",
            "fedavg",
            "--data",
            str(empty),
            "--out",
            str(tmp_path / "a"),
            "--base",
            str(tiny_base),
        ]
    )
    assert result.exit_code != 0 and "no imdb_train_client" in result.output

    no_val = tmp_path / "no_val"
    shutil.copytree(tiny_data / "participant", no_val)
    (no_val / "imdb_val.npy").unlink()
    result = _cli(
        [
            "--method",
            "fedavg",
            "--data",
            str(no_val),
            "--out",
            str(tmp_path / "b"),
            "--base",
            str(tiny_base),
        ]
    )
    assert result.exit_code != 0 and "imdb_val.npy" in result.output
    assert not (tmp_path / "b" / "state").exists()


def test_existing_runs_are_not_overwritten_and_resume_needs_a_run(
    tiny_data, tiny_base, tmp_path
) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    args = ["--method", "lora", "--data", str(tiny_data), "--base", str(tiny_base)]
    result = _cli([*args, "--out", str(out)])
    assert result.exit_code != 0 and "--resume" in result.output
    result = _cli([*args, "--out", str(tmp_path / "none"), "--resume"])
    assert result.exit_code != 0 and "not a run directory" in result.output
