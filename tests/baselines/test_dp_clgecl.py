"""DP-CLGECL: the primal-dual correction on a hand-computed problem, and the DP mechanism around
it (clipping, noise, what the dual variable reads) on the toy federation and the tiny VT5."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from baselines.config import TrainConfig
from baselines.core.client_job import ClientJob
from baselines.core.parameters import get_values
from baselines.engine.document_task import build_task
from baselines.engine.simulation import FederatedSimulation
from baselines.methods.dp_clgecl import DUAL, PROPOSAL, augmented_loss, dual_step
from baselines.presets import preset_config
from baselines.privacy.mechanism import update_norm
from baselines.run_directory import RunDirectory
from tests.baselines.toy import toy_task

# Two clients, f_i(w) = a_i / 2 (w - b_i)^2. The consensus optimum of f_1 + f_2 is
# w* = (a_1 b_1 + a_2 b_2) / (a_1 + a_2) = (1 * 0 + 4 * 1) / 5 = 0.8.
A, B = (1.0, 4.0), (0.0, 1.0)
OPTIMUM = 0.8
LR, STEPS = 0.1, 10


def _local(z: float, dual: float, a: float, b: float, alpha: float) -> float:
    """K gradient steps on the augmented local loss, through the method's own loss function."""
    w = torch.tensor(z, dtype=torch.float64, requires_grad=True)
    start = {"w": torch.tensor(z, dtype=torch.float64)}
    duals = {"w": torch.tensor(dual, dtype=torch.float64)} if dual else {}
    for _ in range(STEPS):
        loss = augmented_loss(0.5 * a * (w - b) ** 2, {"w": w}, start, duals, alpha)
        (grad,) = torch.autograd.grad(loss, w)
        w = (w - LR * grad).detach().requires_grad_(True)
    return float(w.detach())


def _federate(alpha: float, rounds: int = 300) -> float:
    """Both clients every round, server mean of the proposals (learning rate 1)."""
    z, duals, proposals = 0.0, [0.0, 0.0], [None, None]
    for _ in range(rounds):
        for i in range(2):
            if proposals[i] is not None and alpha > 0:
                duals[i] = float(
                    dual_step(
                        {"w": torch.tensor(duals[i])},
                        {"w": torch.tensor(proposals[i])},
                        {"w": torch.tensor(z)},
                        alpha,
                    )["w"]
                )
            proposals[i] = _local(z, duals[i], A[i], B[i], alpha)
        z = sum(proposals) / 2
    return z


def test_fedavg_with_local_steps_stops_at_a_drifted_point() -> None:
    """FedAvg's fixed point is sum c_i b_i / sum c_i with c_i = 1 - (1 - lr a_i)^K, here
    (0.651 * 0 + 0.994 * 1) / 1.645 = 0.604, not 0.8."""
    c = [1 - (1 - LR * a) ** STEPS for a in A]
    drifted = (c[0] * B[0] + c[1] * B[1]) / (c[0] + c[1])
    assert _federate(alpha=0.0) == pytest.approx(drifted, abs=1e-6)
    assert abs(drifted - OPTIMUM) > 0.15


def test_the_dual_correction_reaches_the_consensus_optimum() -> None:
    assert _federate(alpha=0.5) == pytest.approx(OPTIMUM, abs=1e-6)


def test_the_dual_step_and_the_augmented_loss_by_hand() -> None:
    dual = dual_step(
        {"w": torch.tensor([1.0, -1.0])},
        {"w": torch.tensor([2.0, 0.0])},
        {"w": torch.tensor([1.0, 1.0])},
        0.5,
    )
    assert torch.equal(dual["w"], torch.tensor([0.5, -0.5]))  # 1 + .5(1 - 2), -1 + .5(1 - 0)
    w = torch.tensor([3.0, 1.0])
    loss = augmented_loss(
        torch.tensor(2.0),
        {"w": w},
        {"w": torch.tensor([1.0, 1.0])},
        {"w": torch.tensor([0.5, -0.5])},
        0.5,
    )
    assert float(loss) == pytest.approx(2.0 - (0.5 * 2.0 - 0.5 * 0.0) + 0.25 * 4.0)
    live = w.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(
        augmented_loss(
            torch.tensor(2.0),
            {"w": live},
            {"w": torch.tensor([1.0, 1.0])},
            {"w": torch.tensor([0.5, -0.5])},
            0.5,
        ),
        live,
    )
    assert torch.equal(grad, torch.tensor([-0.5 + 0.5 * 2.0, 0.5 + 0.0]))  # -lambda + alpha(w - z)


CONFIG = TrainConfig(
    method="dp-clgecl",
    optimizer="sgd",
    rounds=3,
    clients_per_round=3,
    batch_size=8,
    val_limit=0,
    options={
        "lr": 0.05,
        "momentum": 0.9,
        "frozen": (),
        "noise_multiplier": 0.5,
        "clipping_norm": 0.5,
        "providers_per_round": 1,
        "clgecl_alpha": 0.1,
        "weighted": False,
    },
)


def test_the_dual_reads_only_what_the_client_sent(tmp_path: Path) -> None:
    """After a round, the kept proposal is the global model plus the privatised difference that
    went through the channel; at the next round the dual moves by alpha (z' - proposal)."""
    simulation = FederatedSimulation(
        CONFIG.replace(rounds=1), toy_task(), RunDirectory(tmp_path / "one"), progress=False
    )
    start = get_values(simulation.model, simulation.parameters)
    simulation.run()
    assert len(simulation.client_states) == 3
    for state in simulation.client_states.values():
        assert {k[len(PROPOSAL) :] for k in state if k.startswith(PROPOSAL)} == set(start)
        assert not any(k.startswith(DUAL) for k in state)  # no dual before a global model came back
    # the server mean of (proposal - start) is the new global model (fedavg, unweighted)
    end = get_values(simulation.model, simulation.parameters)
    mean = {
        n: sum(s[PROPOSAL + n] - start[n] for s in simulation.client_states.values()) / 3
        for n in start
    }
    assert all(torch.allclose(end[n], start[n] + mean[n], atol=1e-6) for n in start)
    second = FederatedSimulation(
        CONFIG.replace(rounds=2), toy_task(), RunDirectory(tmp_path / "one"), progress=False
    )
    second.run(resume=True)
    for client, state in second.client_states.items():
        old = simulation.client_states[client]
        for n in start:
            expected = 0.1 * (end[n] - old[PROPOSAL + n])
            assert torch.allclose(state[DUAL + n], expected, atol=1e-6)


def test_dp_clgecl_with_alpha_zero_is_dp_fedavg(tmp_path: Path) -> None:
    runs = {}
    for method in ("dp-clgecl", "dp-fedavg"):
        options = {k: v for k, v in CONFIG.options.items() if k != "clgecl_alpha"}
        if method == "dp-clgecl":
            options["clgecl_alpha"] = 0.0
        config = TrainConfig(**{**dataclasses.asdict(CONFIG), "method": method, "options": options})
        simulation = FederatedSimulation(
            config, toy_task(), RunDirectory(tmp_path / method), progress=False
        )
        simulation.run()
        runs[method] = get_values(simulation.model, simulation.parameters)
    assert all(torch.equal(runs["dp-clgecl"][n], runs["dp-fedavg"][n]) for n in runs["dp-fedavg"])


def test_with_a_dual_removing_a_provider_changes_the_pre_noise_sum_by_at_most_s(
    tiny_data: Path, tiny_base: Path, tmp_path: Path
) -> None:
    """dp-clgecl's client update on the tiny VT5 with a large dual variable already in the
    client's state: each provider's corrected update is still clipped to S, so removing one
    provider moves the pre-noise sum by at most S (noise made negligible, every provider taken)."""
    task = build_task(tiny_data, tiny_base, val_limit=0, progress=False)
    config = preset_config("dp-clgecl", rounds=1, epsilon=8.0)
    simulation = FederatedSimulation(config, task, RunDirectory(tmp_path / "run"), progress=False)
    method = simulation.method
    s = 1e-3
    method.plan = dataclasses.replace(
        method.plan, noise_multiplier=1e-12, clipping_norm=s, providers_per_round=2
    )
    client = next(k for k, data in enumerate(task.client_data) if len(set(data["provider"])) == 3)
    start = get_values(simulation.model, simulation.parameters)
    generator = torch.Generator().manual_seed(3)
    dual = {DUAL + n: torch.randn(t.shape, generator=generator) for n, t in start.items()}

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
            state=dict(dual),
        )
        job.loss = lambda batch, outputs: method.local_loss(job, batch, outputs)
        update = method.compute_update(job)
        return {name: 2 * tensor for name, tensor in update.delta.items()}

    data = task.client_data[client]
    full = pre_noise_sum(data)
    assert update_norm(full) <= 3 * s * (1 + 1e-5)
    for removed in sorted(set(data["provider"])):
        rows = [i for i, p in enumerate(data["provider"]) if p != removed]
        change = update_norm({n: full[n] - v for n, v in pre_noise_sum(data.select(rows)).items()})
        assert 0.9 * s < change <= s * (1 + 1e-5), (removed, change)
