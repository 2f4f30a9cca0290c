"""The track-2 presets end to end on `tiny` data, and the mechanism inside a real client update."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from accountant.declaration import FIELDS
from baselines.cli import train
from baselines.core.client_job import ClientJob
from baselines.core.parameters import get_values
from baselines.engine.document_task import build_task
from baselines.engine.simulation import FederatedSimulation
from baselines.presets import DP_PRESETS, preset_config
from baselines.privacy.mechanism import update_norm
from baselines.run_directory import RunDirectory
from pflkit.dp import verify_command

EPSILON = {"dp-fedavg": 8.0, "dp-lora": 4.0, "dp-clgecl": 8.0, "dp-clgecl-lora": 4.0}


def _train(args: list[str]):
    return CliRunner().invoke(train, [*args, "--no-progress"], catch_exceptions=False)


@pytest.fixture(scope="module")
def dp_runs(tmp_path_factory, tiny_data: Path, tiny_base: Path) -> dict[str, Path]:
    runs = {}
    for preset in DP_PRESETS:
        out = tmp_path_factory.mktemp("dp") / preset
        result = _train(
            [
                "--method",
                preset,
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
                "--epsilon",
                str(EPSILON[preset]),
            ]
        )
        assert result.exit_code == 0, result.output
        runs[preset] = out
    return runs


@pytest.mark.parametrize("preset", sorted(DP_PRESETS))
def test_a_dp_run_writes_a_declaration_that_verifies(preset: str, dp_runs) -> None:
    out = dp_runs[preset]
    declaration = json.loads((out / "privacy.json").read_text())
    assert set(declaration) == set(FIELDS)
    # tiny: 10 clients holding 2 or 3 providers; m = max(1, round(2 x 50/400)) = 1
    assert {key: declaration[key] for key in FIELDS if key != "noise_multiplier"} == {
        "epsilon": EPSILON[preset],
        "delta": 1e-5,
        "clipping_norm": 0.5,
        "rounds": 1,
        "clients": 10,
        "clients_per_round": 2,
        "providers_per_round": 1,
        "min_providers": 2,
        "sampling": "poisson",
        "analysis": "competition",
        "unit": "provider",
    }
    result = CliRunner().invoke(verify_command, [str(out), "--json"])  # pflkit dp verify RUN_DIR
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["passed"] and report["epsilon"]["rdp"] <= EPSILON[preset]
    assert report["sample_rate"] == pytest.approx(2 / 10 * 1 / 2)

    submission = json.loads((out / "submission.json").read_text())
    assert submission["track"] == 2 and submission["method"] == preset
    assert submission["method_options"]["privacy"] == declaration
    metrics = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    assert len(metrics["clients"]) == 2 and metrics["examples"] == 2  # constant weight m per client
    assert 0.0 <= metrics["val_anls"] <= 1.0


@pytest.mark.parametrize("preset", ["dp-fedavg", "dp-lora"])
def test_each_client_update_logs_its_noise_against_its_clipped_sum(preset: str, dp_runs) -> None:
    out = dp_runs[preset]
    declaration = json.loads((out / "privacy.json").read_text())
    row = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    sent = json.loads((out / "communication_log.jsonl").read_text().splitlines()[0])
    values = sent["amount_of_bytes"] // 4  # fp32 wire: 4 bytes a value
    sigma, clip = declaration["noise_multiplier"], declaration["clipping_norm"]
    assert len(row["privacy"]) == len(row["clients"]) == 2
    for client in row["privacy"]:
        assert client["dp_noise_norm"] == pytest.approx(sigma * clip * values**0.5)
        # one provider per client at most on tiny (m = 1): the clipped sum is that update
        # clipped to S, or nothing when Poisson sampling drew no provider
        assert 0.0 <= client["dp_clipped_sum_norm"] <= clip
        if client["dp_clipped_share"] == 1.0:
            assert client["dp_update_norm_median"] > clip
            assert client["dp_clipped_sum_norm"] == pytest.approx(clip, rel=1e-5)


def test_dp_lora_sends_only_adapters_and_the_winners_modules(dp_runs) -> None:
    records = [
        json.loads(line)
        for line in (dp_runs["dp-lora"] / "communication_log.jsonl").read_text().splitlines()
    ]
    names = records[0]["parameters"]
    assert any("lora_A" in n for n in names) and any("lora_B" in n for n in names)
    assert all(
        "lora_" in n or n.startswith(("spatial_embedding.", "visual_embedding.visual_emb_matcher."))
        for n in names
    )
    full = json.loads((dp_runs["dp-fedavg"] / "submission.json").read_text())
    lora = json.loads((dp_runs["dp-lora"] / "submission.json").read_text())
    assert lora["bytes_per_message"] < full["bytes_per_message"]


def test_resume_cannot_change_the_rounds_of_a_dp_run(dp_runs, tiny_data: Path, tiny_base) -> None:
    result = CliRunner().invoke(
        train,
        [
            "--method",
            "dp-fedavg",
            "--data",
            str(tiny_data),
            "--out",
            str(dp_runs["dp-fedavg"]),
            "--base",
            str(tiny_base),
            "--rounds",
            "2",
            "--epsilon",
            "8",
            "--resume",
            "--no-progress",
        ],
    )
    assert result.exit_code != 0 and "calibrated" in result.output


def test_bad_privacy_input_fails_before_training(
    tmp_path: Path, tiny_data: Path, tiny_base
) -> None:
    common = [
        "--data",
        str(tiny_data),
        "--base",
        str(tiny_base),
        "--rounds",
        "1",
        "--val-limit",
        "0",
    ]
    cases = [
        (["--method", "dp-fedavg", "--epsilon", "0"], "--epsilon must be > 0"),
        (["--method", "dp-lora", "--epsilon", "1", "--delta", "1.5"], "--delta must be in (0, 1)"),
        (["--method", "dp-lora"], "needs --epsilon"),
        (
            ["--method", "dp-fedavg", "--epsilon", "1", "--providers-per-round", "3"],
            "--providers-per-round 3 exceeds the fewest providers at a client (2)",
        ),
    ]
    for index, (args, message) in enumerate(cases):
        out = tmp_path / f"run{index}"
        result = CliRunner().invoke(train, [*args, *common, "--out", str(out), "--no-progress"])
        assert result.exit_code != 0 and message in result.output, result.output
        assert not (out / "state").exists() and not (out / "privacy.json").exists()


def test_a_data_directory_without_provider_information_is_refused(
    tmp_path: Path, tiny_data: Path, tiny_base: Path
) -> None:
    from benchmark.data.imdb import read_imdb, write_imdb
    from benchmark.data.reader import find_split

    source = find_split(tiny_data, "val").parent
    stripped = tmp_path / "no-providers"
    stripped.mkdir()
    (stripped / "images").symlink_to(source / "images")
    for path in source.glob("imdb_*.npy"):
        header, records = read_imdb(path)
        write_imdb(
            stripped / path.name,
            header,
            [{k: v for k, v in r.items() if k != "provider"} for r in records],
        )
    assert not (stripped / "data_points.json").exists()
    result = CliRunner().invoke(
        train,
        [
            "--method",
            "dp-lora",
            "--epsilon",
            "4",
            "--data",
            str(stripped),
            "--base",
            str(tiny_base),
            "--out",
            str(tmp_path / "run"),
            "--val-limit",
            "0",
            "--no-progress",
        ],
    )
    assert result.exit_code != 0 and "data_points.json" in result.output, result.output
    assert not (tmp_path / "run" / "state").exists()


def test_removing_a_provider_changes_a_real_clients_pre_noise_sum_by_at_most_s(
    tiny_data: Path, tiny_base: Path, tmp_path: Path
) -> None:
    """The client update of dp-lora on the tiny VT5, noise made negligible, every provider taken."""
    task = build_task(tiny_data, tiny_base, val_limit=0, progress=False)
    config = preset_config("dp-lora", rounds=1, epsilon=4.0)
    simulation = FederatedSimulation(config, task, RunDirectory(tmp_path / "run"), progress=False)
    method = simulation.method
    s = 1e-3  # small enough that every provider's update is clipped
    method.plan = dataclasses.replace(
        method.plan, noise_multiplier=1e-12, clipping_norm=s, providers_per_round=2
    )  # rate m/N = 1: all providers
    client = next(k for k, data in enumerate(task.client_data) if len(set(data["provider"])) == 3)
    start = get_values(simulation.model, simulation.parameters)

    def pre_noise_sum(dataset) -> dict[str, torch.Tensor]:
        job = ClientJob(
            federated_round=1,
            client=client,
            model=simulation.model,
            parameters=simulation.parameters,
            start_weights=start,
            dataset=dataset,
            trainer=simulation.trainer,
            seed=11,
        )
        update = method.compute_update(job)
        assert update.num_examples == 2
        return {name: 2 * tensor for name, tensor in update.delta.items()}  # undo the / m

    data = task.client_data[client]
    full = pre_noise_sum(data)
    assert update_norm(full) <= 3 * s * (1 + 1e-5)
    for removed in sorted(set(data["provider"])):
        rows = [i for i, p in enumerate(data["provider"]) if p != removed]
        without = pre_noise_sum(data.select(rows))
        change = update_norm({n: full[n] - without[n] for n in full})
        assert 0.9 * s < change <= s * (1 + 1e-5), (removed, change)
    assert all(
        torch.equal(v, start[n])
        for n, v in get_values(simulation.model, simulation.parameters).items()
    )  # model reset after


def test_the_dp_scale_table_reads_a_scored_verified_run(dp_runs, tiny_data: Path) -> None:
    from benchmark.evaluation.cli import evaluate
    from experiments.dp_scale_report import (
        anls_and_cost_tables,
        clipping_table,
        dp_scale_table,
        read_dp_scale_run,
    )
    from experiments.scoring import verify_privacy

    out = dp_runs["dp-fedavg"]
    scored = CliRunner().invoke(
        evaluate,
        [str(out / "checkpoint"), "--data", str(tiny_data), "--split", "val", "--json"],
        catch_exceptions=False,
    )
    assert scored.exit_code == 0, scored.output
    (out / "val.json").write_text(scored.stdout)
    verify_privacy(out)
    run = read_dp_scale_run(out, "dp-fedavg", "eps8", seed=0)
    declaration = json.loads((out / "privacy.json").read_text())
    values = (
        json.loads((out / "communication_log.jsonl").read_text().splitlines()[0])["amount_of_bytes"]
        // 4
    )
    assert run.val_anls == json.loads((out / "val.json").read_text())["anls"]
    assert run.verified_epsilon is not None and run.verified_epsilon <= 8.0
    assert run.noise_multiplier == declaration["noise_multiplier"]
    # the clipped sum of m = 1 provider is at most S: noise / signal >= sigma sqrt(d)
    if run.noise_to_signal is not None:
        assert run.noise_to_signal >= declaration["noise_multiplier"] * values**0.5 * 0.999
    table = dp_scale_table([run], base_anls=0.25, seeds=(0, 1))
    base, row = table.rows
    assert row["run"] == "`dp-fedavg`" and row["epsilon"] == f"8 ({run.verified_epsilon:.3f})"
    assert (row["seed_0"], row["seed_1"], row["mean"]) == (run.val_anls, "", run.val_anls)
    assert row["spread"] == "one seed"
    assert row["mean_minus_base"] == pytest.approx(run.val_anls - 0.25)
    assert base["run"] == "base (no training)" and base["mean"] == 0.25
    anls, cost = anls_and_cost_tables(table, seeds=(0, 1))
    assert [c.key for c in anls.columns] == [
        "run", "epsilon", "sigma", "seed_0", "seed_1", "mean", "spread", "mean_minus_base"
    ]  # fmt: skip
    assert [r["run"] for r in anls.rows] == ["base (no training)", "`dp-fedavg`"]
    assert [r["run"] for r in cost.rows] == ["`dp-fedavg`"]  # the base has no mechanism or cost
    assert cost.rows[0]["total_bytes"] == row["total_bytes"]
    # the clipping table reads each provider's update norm from the run's privacy rows
    assert run.update_norm is not None and run.update_norm > 0
    preset = dataclasses.replace(run, preset="dp-fedavg-competition")
    (clipping,) = clipping_table([preset], base_anls=0.25).rows
    assert clipping["row"] == "S = 0.5, lr 2e-4 (the preset)"
    assert clipping["update_norm"] == pytest.approx(run.update_norm)
    assert (clipping["seed_0"], clipping["seed_1"]) == (run.val_anls, "")
