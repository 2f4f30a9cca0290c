"""Track-3 methods on Flower's simulation engine reproduce the in-process run.

After the rounds each client's personalisation runs on its node (``train.personalise``) from the
state the rounds left there (FedDAT's local adapter, in Flower's ``Context.state``), and the node
answers the client's state. The communication log (round R + 1: the final model sent to every
client, nothing back; after 0 rounds, ``local-only``, nothing at all), the global weights and every client's personal tensors must be the
in-process engine's for the same seed; the states' Flower bytes are in
``flower_messages.jsonl``, not in the kit's log. Needs ``.venv-flower`` (``make flower-setup``).
The `fedavg-ft` run is in `make test-flower` (and so in CI); the others are in `make test-slow`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from baselines.flower.local import LocalFederation
from baselines.presets import preset_config
from tests.baselines.flower_runs import (
    FLOWER_BIN,
    assert_same_run,
    run_in_process,
    skip_without_flower,
)

skip_without_flower()


@pytest.fixture(scope="module")
def simulation(tmp_path_factory: pytest.TempPathFactory,
               tiny_data: Path) -> Iterator[LocalFederation]:
    root = tmp_path_factory.mktemp("simulation")
    with LocalFederation(root=root, bin_dir=FLOWER_BIN, data=tiny_data) as running:
        running.start(simulation=True)
        yield running


def _personal(run: Path) -> dict[str, dict[str, torch.Tensor]]:
    return {path.name: load_file(path) for path in sorted((run / "personal").glob("*.safetensors"))}


@pytest.mark.parametrize(("preset", "rounds"), [
    pytest.param("fedavg-ft", 1, marks=pytest.mark.flower, id="fedavg-ft"),
    pytest.param("feddat", 2, marks=pytest.mark.slow, id="feddat"),
    pytest.param("local-only", 0, marks=pytest.mark.slow, id="local-only"),
])
def test_personalisation_on_flower_simulation_equals_in_process(
        preset: str, rounds: int, simulation: LocalFederation, tiny_data: Path, tiny_base: Path,
        tmp_path: Path) -> None:
    flower, in_process = tmp_path / "flower", tmp_path / "in-process"
    done = simulation.train(flower, "--preset", preset, "--base", str(tiny_base),
                            "--val-limit", "0", "--threads", "1", "--rounds", str(rounds),
                            "--local-epochs", "1", timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    options = {"rounds": rounds, "local_epochs": 1}
    run_in_process(preset, options, tiny_data, tiny_base, in_process)

    assert_same_run(flower, in_process)
    config = preset_config(preset, **options)
    log = [json.loads(line) for line in (flower / "communication_log.jsonl").read_text().splitlines()]
    after = [r["receiver"] for r in log if r["federated_round"] == rounds + 1]
    assert after == ([] if rounds == 0 else list(range(10)))
    assert len(log) == 2 * config.clients_per_round * rounds + len(after)

    first, second = _personal(in_process), _personal(flower)
    assert first.keys() == second.keys() and len(first) == 10
    assert sum(1 for tensors in second.values() if tensors) == 10
    for name, tensors in first.items():
        assert tensors.keys() == second[name].keys(), name
        for key, value in tensors.items():
            torch.testing.assert_close(second[name][key], value, rtol=0, atol=1e-6,
                                       msg=f"{name} {key}")
    assert (json.loads((flower / "submission.json").read_text())["personal"]
            == json.loads((in_process / "submission.json").read_text())["personal"])

    framing = [json.loads(line) for line in (flower / "flower_messages.jsonl").read_text().splitlines()]
    answers = [r for r in framing if r["message_type"] == "train.personalise" and r["sender"] != -1]
    assert sorted(r["sender"] for r in answers) == list(range(10))
    assert all(r["payload_bytes"] > 0 and 0 < r["framing_bytes"] < 64 * 1024 for r in answers)
