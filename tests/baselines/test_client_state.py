"""Per-client method state: kept across rounds, saved with the run, restored exactly by resume."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file

from baselines.config import TrainConfig
from baselines.core.client_job import ClientJob, local_training_update
from baselines.core.client_update import ClientUpdate
from baselines.engine.simulation import FederatedSimulation
from baselines.methods import FullFineTuning
from baselines.run_directory import RunDirectory
from tests.baselines.toy import toy_task


class ClientMomentum(FullFineTuning):
    """A toy stateful method: each client sends a momentum of its own past deltas and keeps a
    personal offset (its last momentum) that its personal model adds to the global weights."""

    def compute_update(self, job: ClientJob) -> ClientUpdate:
        update = local_training_update(job)
        for name, delta in update.delta.items():
            job.state[name] = 0.5 * job.state.get(name, torch.zeros_like(delta)) + delta
        return ClientUpdate(
            {name: job.state[name].clone() for name in update.delta},
            update.num_examples,
            update.metrics,
        )

    def personal_model(self, model, state):
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                if name in state:
                    parameter.add_(state[name])
        return model


CONFIG = TrainConfig(
    method="full",
    rounds=4,
    clients_per_round=2,
    batch_size=8,
    val_limit=0,
    options={"lr": 0.05, "frozen": ()},
)


def _simulation(run: Path, rounds: int) -> FederatedSimulation:
    return FederatedSimulation(
        CONFIG.replace(rounds=rounds),
        toy_task(),
        RunDirectory(run),
        progress=False,
        method=ClientMomentum(frozen=()),
    )


def _final(simulation: FederatedSimulation, run: Path) -> dict[str, torch.Tensor]:
    model = simulation.model
    state = {f"global/{n}": p.detach().clone() for n, p in model.named_parameters()}
    for client in range(3):
        personal = simulation.personal_model(client)
        state.update({f"{client}/{n}": p.detach().clone() for n, p in personal.named_parameters()})
    state.update(
        {f"ckpt/{k}": v for k, v in load_file(run / "checkpoint" / "model.safetensors").items()}
    )
    return state


def test_a_resumed_run_with_client_state_ends_bit_identical(tmp_path: Path) -> None:
    whole = _simulation(tmp_path / "whole", 4)
    whole.run()
    first = _simulation(tmp_path / "parts", 2)
    first.run()
    saved = load_file(next((tmp_path / "parts" / "state").glob("round-*")) / "clients.safetensors")
    assert saved and all("/" in key for key in saved)  # per-client tensors are in the state
    resumed = _simulation(tmp_path / "parts", 4)
    resumed.run(resume=True)

    assert resumed.client_states.keys() == whole.client_states.keys()
    for client, tensors in whole.client_states.items():
        assert all(torch.equal(tensors[n], resumed.client_states[client][n]) for n in tensors)
    a, b = _final(whole, tmp_path / "whole"), _final(resumed, tmp_path / "parts")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert (tmp_path / "whole" / "communication_log.jsonl").read_text() == (
        tmp_path / "parts" / "communication_log.jsonl"
    ).read_text()


def test_the_state_matters_and_personal_models_differ_from_the_global_one(tmp_path: Path) -> None:
    simulation = _simulation(tmp_path / "run", 4)
    simulation.run()
    lost = _simulation(tmp_path / "lost", 2)
    lost.run()
    lost = _simulation(tmp_path / "lost", 4)
    lost.run_dir.load_state = _forgetful(lost.run_dir.load_state)
    lost.run(resume=True)
    weights = dict(simulation.model.named_parameters())
    forgot = dict(lost.model.named_parameters())
    assert not all(torch.equal(weights[n], forgot[n]) for n in weights)
    personal = dict(simulation.personal_model(0).named_parameters())
    assert not all(torch.equal(weights[n], personal[n]) for n in weights)


def _forgetful(load_state):
    """``RunDirectory.load_state`` that drops the client states (what resume used to do)."""

    def load():
        state = load_state()
        state.client_states = {}
        return state

    return load
