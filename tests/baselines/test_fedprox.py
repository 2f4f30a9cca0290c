"""FedProx (baselines/methods/fedprox.py): the proximal term, its preset and its options."""

from __future__ import annotations

import functools

import pytest
import torch
from click.testing import CliRunner

from baselines.cli import train
from baselines.core.client_job import ClientJob
from baselines.core.parameters import get_values, select_communicated
from baselines.engine.local_training import LocalTrainer
from baselines.methods import METHODS, FullFineTuning
from baselines.methods.fedprox import FedProx
from baselines.presets import PRESETS, preset_config
from tests.baselines.toy import ToyRegression, toy_task


def _local_distance(method, *, epochs: int = 20) -> tuple[float, dict[str, torch.Tensor]]:
    """Train client 2 of the toy federation from the same start; distance to the start."""
    task = toy_task()
    model = method.prepare(ToyRegression(), seed=0)
    parameters = select_communicated(model)
    start = get_values(model, parameters)
    trainer = LocalTrainer(task.collate, epochs=epochs, batch_size=8, lr=0.05)
    job = ClientJob(
        federated_round=1,
        client=2,
        model=model,
        parameters=parameters,
        start_weights=start,
        dataset=task.client_data[2],
        trainer=trainer,
        seed=3,
    )
    job.loss = functools.partial(method.local_loss, job)
    job.train()
    delta = job.delta()
    return float(torch.sqrt(sum(d.pow(2).sum() for d in delta.values()))), delta


def test_the_proximal_term_pulls_the_local_model_toward_the_global_one() -> None:
    free, _ = _local_distance(FedProx(frozen=(), mu=0.0))
    pulled, _ = _local_distance(FedProx(frozen=(), mu=1.0))
    held, _ = _local_distance(FedProx(frozen=(), mu=10.0))
    assert held < pulled < free


def test_mu_zero_is_exactly_full_fine_tuning() -> None:
    _, fedprox = _local_distance(FedProx(frozen=(), mu=0.0), epochs=3)
    _, fedavg = _local_distance(FullFineTuning(frozen=()), epochs=3)
    assert all(torch.equal(fedprox[name], fedavg[name]) for name in fedavg)


def test_fedprox_is_registered_with_its_preset_and_options() -> None:
    assert METHODS["fedprox"] is FedProx
    assert PRESETS["fedprox"]["method"] == "fedprox"
    config = preset_config("fedprox", fedprox_mu=0.1)
    method = config.build_method()
    assert isinstance(method, FedProx) and method.mu == 0.1
    assert config.to_dict()["options"]["fedprox_mu"] == 0.1
    with pytest.raises(ValueError, match="--fedprox-mu must be >= 0"):
        preset_config("fedprox", fedprox_mu=-1.0)
    with pytest.raises(ValueError, match="fedprox_mu belong to neither method 'lora'"):
        preset_config("lora", fedprox_mu=0.1)


def test_fedprox_appears_in_pflkit_train_help() -> None:
    result = CliRunner().invoke(train, ["--help"])
    assert result.exit_code == 0
    assert "fedprox" in result.output and "--fedprox-mu" in result.output
