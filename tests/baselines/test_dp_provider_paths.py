"""The streamed per-provider path gives the reference loop's clipped sum, on a real tiny client."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from baselines.core.client_job import ClientJob
from baselines.core.parameters import get_values
from baselines.engine.document_task import build_task
from baselines.engine.simulation import FederatedSimulation
from baselines.presets import preset_config
from baselines.privacy.clipped_sum import ClippedSum
from baselines.privacy.mechanism import sum_clipped, update_norm
from baselines.run_directory import RunDirectory


def test_clipped_sum_matches_sum_clipped_on_random_updates() -> None:
    generator = torch.Generator().manual_seed(0)
    start = {"a": torch.randn(5, 3, generator=generator), "b": torch.randn(7, generator=generator)}
    for s in (1e-2, 1.0, 100.0):
        trained = [
            {n: t + scale * torch.randn(t.shape, generator=generator) for n, t in start.items()}
            for scale in (0.001, 0.5, 3.0)
        ]
        updates = [{n: values[n] - start[n] for n in start} for values in trained]
        accumulator = ClippedSum(start, s)
        for values, update in zip(trained, updates, strict=True):
            assert accumulator.add(values) == pytest.approx(update_norm(update), rel=1e-12)
        reference = sum_clipped(updates, s, like=start)
        for name in start:
            assert torch.allclose(accumulator.total[name], reference[name], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("preset", ["dp-fedavg", "dp-lora"])
@pytest.mark.parametrize("clipping_norm", [1e-3, 1e3])
def test_streamed_and_reference_paths_give_the_same_pre_noise_sum(
    preset: str, clipping_norm: float, tiny_data: Path, tiny_base: Path, tmp_path: Path
) -> None:
    task = build_task(tiny_data, tiny_base, val_limit=0, progress=False)
    config = preset_config(preset, rounds=1, epsilon=4.0)
    simulation = FederatedSimulation(config, task, RunDirectory(tmp_path / "run"), progress=False)
    method = simulation.method
    method.plan = dataclasses.replace(
        method.plan, clipping_norm=clipping_norm, providers_per_round=2
    )  # rate m/N = 1: every provider
    client = next(k for k, data in enumerate(task.client_data) if len(set(data["provider"])) == 3)
    start = get_values(simulation.model, simulation.parameters)
    job = ClientJob(
        federated_round=1,
        client=client,
        model=simulation.model,
        parameters=simulation.parameters,
        start_weights=start,
        dataset=task.client_data[client],
        trainer=simulation.trainer,
        seed=11,
    )
    sampled = method.sampled_providers(job)
    assert len(sampled) == 3

    sums = {}
    for path in ("reference", "streamed"):
        method.options = dataclasses.replace(method.options, provider_path=path)
        sums[path], losses, steps, _ = method.clipped_sum(job, sampled)
        assert len(losses) == 3 and steps >= 3
        assert all(
            torch.equal(v, start[n])
            for n, v in get_values(simulation.model, simulation.parameters).items()
        )  # reset after
    reference, streamed = sums["reference"], sums["streamed"]
    assert update_norm(reference) > 0
    assert update_norm(streamed) <= 3 * clipping_norm
    for name in reference:
        if clipping_norm > 1:  # nothing clipped: the same float32 additions in the same order
            assert torch.equal(streamed[name], reference[name]), name
        else:
            assert torch.allclose(streamed[name], reference[name], rtol=1e-5, atol=1e-9), name
