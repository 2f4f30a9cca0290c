"""The local optimiser axis: AdamW, momentum SGD and Shampoo; element-wise clipping; whether a
client's optimiser state persists across rounds (and survives --resume bit for bit)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from baselines.config import TrainConfig
from baselines.engine.local_training import LocalTrainer, chain_step_hooks, clip_grad_value
from baselines.engine.simulation import FederatedSimulation
from baselines.optimizers import OPTIMIZERS
from baselines.optimizers.shampoo import ShampooOptimizer, inverse_root
from baselines.optimizers.state import PREFIX, export_state, import_state
from baselines.presets import preset_config
from baselines.run_directory import RunDirectory
from tests.baselines.toy import ToyRegression, toy_task

LR = {"adamw": 0.05, "adamw8bit": 0.05, "sgd": 0.02, "shampoo": 0.05}


def _mean_loss(model, data, collate) -> float:
    with torch.no_grad():
        return float(model(**collate(list(data))).loss)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_every_optimizer_reduces_the_loss_of_a_toy_model(name: str) -> None:
    task = toy_task(clients=1, rows=48)
    data = task.client_data[0]
    model = ToyRegression()
    before = _mean_loss(model, data, task.collate)
    optimizer = OPTIMIZERS[name].from_options({"lr": LR[name]})
    LocalTrainer(task.collate, epochs=10, batch_size=8, optimizer=optimizer).train(
        model, data, seed=0
    )
    after = _mean_loss(model, data, task.collate)
    assert after < 0.5 * before, (name, before, after)


def test_the_registry_and_the_command_line_name_every_optimizer() -> None:
    assert {"adamw", "sgd", "shampoo"} <= set(OPTIMIZERS)
    config = preset_config("fedavg", optimizer="shampoo")
    assert config.optimizer == "shampoo" and config.build_optimizer().name == "shampoo"
    assert preset_config("fedshampoo").optimizer == "shampoo"
    with pytest.raises(ValueError, match="max-grad-value"):
        preset_config("fedavg", max_grad_value=0.0)


def test_element_wise_clipping_bounds_every_entry_and_keeps_small_ones() -> None:
    layer = torch.nn.Linear(4, 3)
    grads = [torch.tensor([[5.0, -0.01, 0.3, -7.0]] * 3), torch.tensor([0.02, -2.0, 0.5])]
    for parameter, grad in zip(layer.parameters(), grads, strict=True):
        parameter.grad = grad.clone()
    clip_grad_value(0.1)(list(layer.parameters()))
    for parameter, grad in zip(layer.parameters(), grads, strict=True):
        assert parameter.grad.abs().max() <= 0.1
        assert torch.equal(parameter.grad, grad.clamp(-0.1, 0.1))
    with pytest.raises(ValueError):
        clip_grad_value(0.0)


def test_every_gradient_entry_is_clipped_during_local_training() -> None:
    """The engine's hook runs between backward and the step: every entry the optimiser sees is
    in [-c, c], while the raw gradients exceed c."""
    task = toy_task(clients=1, rows=32)
    seen: list[float] = []
    raw: list[float] = []

    def record_raw(parameters):
        raw.append(max(float(p.grad.abs().max()) for p in parameters))

    def record(parameters):
        seen.append(max(float(p.grad.abs().max()) for p in parameters))

    hook = chain_step_hooks(record_raw, clip_grad_value(0.05), record)
    trainer = LocalTrainer(task.collate, epochs=2, batch_size=8, lr=0.01, step_hook=hook)
    trainer.train(ToyRegression(), task.client_data[0], seed=0)
    assert (
        max(raw) > 0.05 and len(seen) == 8 and max(seen) <= float(torch.tensor(0.05))
    )  # c in fp32


def test_shampoo_on_a_hand_computed_2x2_case() -> None:
    """G = [[1, 1], [1, 1]] = 2 v v^T with v = (1, 1)/sqrt(2). Step 1: L = R = eps I + 4 v v^T,
    so L^(-1/4) G R^(-1/4) = 2 / sqrt(4) v v^T = v v^T (the eps terms act on the complement of v,
    where G is 0). Step 2 (same G): L = R = eps I + 8 v v^T, direction 2 / sqrt(8) v v^T."""
    weight = torch.nn.Parameter(torch.zeros(2, 2, dtype=torch.float64))
    optimizer = ShampooOptimizer([weight], lr=1.0, eps=1e-12)
    vvt = torch.full((2, 2), 0.5, dtype=torch.float64)
    weight.grad = torch.ones(2, 2, dtype=torch.float64)
    optimizer.step()
    assert torch.allclose(weight.detach(), -vvt, atol=1e-9)
    weight.grad = torch.ones(2, 2, dtype=torch.float64)
    optimizer.step()
    assert torch.allclose(weight.detach(), -vvt * (1 + 2 / math.sqrt(8)), atol=1e-9)
    state = optimizer.state[weight]
    assert torch.allclose(state["L0_0"], 1e-12 * torch.eye(2, dtype=torch.float64) + 4 * vvt * 2)


def test_shampoo_diagonal_2x2_whitens_the_first_step() -> None:
    """G = diag(2, 1): L = R = diag(4, 1), L^(-1/4) G R^(-1/4) = diag(2/2, 1/1) = I."""
    weight = torch.nn.Parameter(torch.zeros(2, 2, dtype=torch.float64))
    weight.grad = torch.diag(torch.tensor([2.0, 1.0], dtype=torch.float64))
    ShampooOptimizer([weight], lr=0.1, eps=1e-12).step()
    assert torch.allclose(weight.detach(), -0.1 * torch.eye(2, dtype=torch.float64), atol=1e-9)
    assert torch.allclose(
        inverse_root(torch.diag(torch.tensor([16.0, 81.0])), 4, 1e-9),
        torch.diag(torch.tensor([0.5, 1 / 3])),
    )


def test_shampoo_preconditions_large_matrices_block_by_block() -> None:
    """A 5x3 matrix with blocks of at most 2: blocks of rows (2, 2, 1) x columns (2, 1), each
    preconditioned on its own, exactly as a lone block would be."""
    torch.manual_seed(0)
    grad = torch.randn(5, 3, dtype=torch.float64)
    weight = torch.nn.Parameter(torch.zeros(5, 3, dtype=torch.float64))
    weight.grad = grad.clone()
    optimizer = ShampooOptimizer([weight], lr=1.0, block_size=2, eps=1e-8)
    optimizer.step()
    keys = {k for k in optimizer.state[weight] if k.startswith("L") and "inv" not in k}
    assert keys == {f"L{i}_{j}" for i in range(3) for j in range(2)}
    block = torch.nn.Parameter(torch.zeros(2, 1, dtype=torch.float64))
    block.grad = grad[2:4, 2:3].clone()
    ShampooOptimizer([block], lr=1.0, eps=1e-8).step()
    assert torch.allclose(weight.detach()[2:4, 2:3], block.detach())
    bias = torch.nn.Parameter(torch.zeros(3, dtype=torch.float64))
    bias.grad = torch.tensor([3.0, -4.0, 0.5], dtype=torch.float64)
    ShampooOptimizer([bias], lr=1.0, eps=1e-12).step()  # vectors: diagonal AdaGrad, sign-like
    assert torch.allclose(bias.detach(), torch.tensor([-1.0, 1.0, -1.0], dtype=torch.float64))


def test_shampoo_is_deterministic_for_a_seed() -> None:
    task = toy_task(clients=1, rows=40)
    results = []
    for _ in range(2):
        model = ToyRegression()
        optimizer = OPTIMIZERS["shampoo"].from_options({"lr": 0.05})
        LocalTrainer(task.collate, epochs=3, batch_size=8, optimizer=optimizer).train(
            model, task.client_data[0], seed=7
        )
        results.append([p.detach().clone() for p in model.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*results, strict=True))


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_state_round_trips_through_named_tensors(name: str) -> None:
    task = toy_task(clients=1, rows=16)
    model = ToyRegression()
    factory = OPTIMIZERS[name].from_options({"lr": 0.01})
    state: dict[str, torch.Tensor] = {}
    LocalTrainer(task.collate, epochs=1, batch_size=8, optimizer=factory).train(
        model, task.client_data[0], seed=0, optimizer_state=state
    )
    assert state and all(k.startswith(PREFIX) for k in state)
    fresh = factory(list(model.parameters()))
    import_state(fresh, state)
    again = export_state(fresh)
    assert again.keys() == state.keys() and all(torch.equal(again[k], state[k]) for k in state)


CONFIG = TrainConfig(
    method="full",
    optimizer="shampoo",
    rounds=4,
    clients_per_round=2,
    batch_size=8,
    val_limit=0,
    options={"lr": 0.05, "frozen": (), "persist_optimizer_state": True, "max_grad_value": 1.0},
)


def _run(path: Path, config: TrainConfig, *, resume: bool = False) -> FederatedSimulation:
    simulation = FederatedSimulation(config, toy_task(), RunDirectory(path), progress=False)
    simulation.run(resume=resume)
    return simulation


def test_persisted_state_is_kept_per_client_and_changes_the_run(tmp_path: Path) -> None:
    kept = _run(tmp_path / "kept", CONFIG)
    fresh = _run(tmp_path / "fresh", CONFIG.replace(persist_optimizer_state=False))
    assert kept.client_states and all(
        any(k.startswith(PREFIX) for k in state) for state in kept.client_states.values() if state
    )
    assert not any(k.startswith(PREFIX) for s in fresh.client_states.values() for k in s)
    # accumulated preconditioners: the statistics of a client grow over its rounds
    client, state = next((c, s) for c, s in kept.client_states.items() if s)
    assert float(state[PREFIX + "0/step"]) > 3  # more steps than one round of 24 rows / 8
    a = dict(kept.model.named_parameters())
    b = dict(fresh.model.named_parameters())
    assert not all(torch.equal(a[n], b[n]) for n in a)


def test_a_resumed_run_keeps_the_optimizer_state_bit_for_bit(tmp_path: Path) -> None:
    whole = _run(tmp_path / "whole", CONFIG)
    _run(tmp_path / "parts", CONFIG.replace(rounds=2))
    saved = load_file(
        sorted((tmp_path / "parts" / "state").glob("round-*"))[-1] / "clients.safetensors"
    )
    assert any("/optimizer/" in key for key in saved)
    resumed = _run(tmp_path / "parts", CONFIG, resume=True)
    assert resumed.client_states.keys() == whole.client_states.keys()
    for client, tensors in whole.client_states.items():
        assert tensors.keys() == resumed.client_states[client].keys()
        assert all(torch.equal(tensors[n], resumed.client_states[client][n]) for n in tensors)
    a, b = dict(whole.model.named_parameters()), dict(resumed.model.named_parameters())
    assert all(torch.equal(a[n], b[n]) for n in a)


def test_a_private_method_refuses_a_persistent_optimizer(tmp_path: Path) -> None:
    config = TrainConfig(
        method="dp-fedavg",
        rounds=1,
        clients_per_round=2,
        val_limit=0,
        options={"noise_multiplier": 1.0, "frozen": (), "persist_optimizer_state": True},
    )
    with pytest.raises(ValueError, match="fresh optimiser"):
        FederatedSimulation(config, toy_task(), RunDirectory(tmp_path / "run"), progress=False)
