"""The client side of a round run by separate parties reproduces the in-process run.

This is what a deployed engine does: the server's loop hands the encoded broadcast to
``fit_round``, and each sampled client's party (its own model built from the shared seed, its own
client's data only, its own method object) answers with an encoded update. The log, the metrics,
the privacy declaration and the global weights must be those of ``FederatedSimulation`` for the
same seed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from baselines.config import TrainConfig
from baselines.core.parameters import get_values
from baselines.core.task import FederatedTask
from baselines.engine.client import ClientReply, FederatedClient
from baselines.engine.document_task import build_task
from baselines.engine.simulation import FederatedSimulation
from baselines.presets import preset_config
from baselines.run_directory import RunDirectory
from baselines.wire import EncodedMessage


@pytest.fixture(scope="module")
def task(tiny_data: Path, tiny_base: Path) -> FederatedTask:
    return build_task(tiny_data, tiny_base, val_limit=0, progress=False)


def _bound_method(config: TrainConfig, task: FederatedTask):
    method = config.build_method()
    method.bind(task)
    return method


class PartiesSimulation(FederatedSimulation):
    """The loop with every client's reply computed by a party of its own (messages only)."""

    def __init__(self, config: TrainConfig, task: FederatedTask, run_dir: RunDirectory) -> None:
        super().__init__(config, task, run_dir, progress=False)
        self.parties: dict[int, FederatedClient] = {}

    def fit_round(
        self, federated_round: int, clients: list[int], broadcast: EncodedMessage
    ) -> list[ClientReply]:
        sent = EncodedMessage(
            bytes(broadcast.payload),
            broadcast.data_bytes,
            broadcast.names,
            broadcast.format,
            broadcast.official_logger_bytes,
        )
        replies = []
        for k in clients:
            if k not in self.parties:  # a party joins when first sampled
                self.parties[k] = FederatedClient.build(
                    self.config, self.task, _bound_method(self.config, self.task), clients=[k]
                )
            replies.append(self.parties[k].fit(federated_round, k, sent))
        return replies


def _global(run: Path) -> dict[str, torch.Tensor]:
    latest = json.loads((run / "state" / "latest.json").read_text())
    return load_file(run / "state" / latest["dir"] / "global.safetensors")


@pytest.mark.parametrize(
    ("preset", "options"),
    [("lora-nf4", {"rounds": 2, "local_epochs": 1}), ("dp-lora", {"rounds": 1, "epsilon": 4.0})],
)
def test_separate_parties_reproduce_the_in_process_run(
    preset, options, task, tmp_path: Path
) -> None:
    config = preset_config(preset, val_limit=0, **options)
    in_process, parties = tmp_path / "in-process", tmp_path / "parties"
    FederatedSimulation(config, task, RunDirectory(in_process), progress=False).run()
    PartiesSimulation(config, task, RunDirectory(parties)).run()

    for name in ("communication_log.csv", "communication_log.jsonl", "metrics.jsonl"):
        assert _without_times(parties / name) == _without_times(in_process / name), name
    if config.build_method().private:
        assert (parties / "privacy.json").read_text() == (in_process / "privacy.json").read_text()
    first, second = _global(in_process), _global(parties)
    assert first.keys() == second.keys()
    for name, value in first.items():
        torch.testing.assert_close(second[name], value, rtol=0, atol=1e-6, msg=name)
    assert len(_log_lines(parties)) == 2 * config.clients_per_round * config.rounds


def _without_times(path: Path) -> list[dict]:
    """The JSON lines of a file (CSV lines as strings) without wall-clock fields."""
    if path.suffix == ".csv":
        return path.read_text().splitlines()
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [{k: v for k, v in row.items() if not k.endswith("_seconds")} for row in rows]


def _log_lines(run: Path) -> list[str]:
    return (run / "communication_log.jsonl").read_text().splitlines()


def test_a_party_refuses_a_client_whose_data_it_does_not_hold(task) -> None:
    config = preset_config("lora", rounds=1, val_limit=0)
    party = FederatedClient.build(config, task, _bound_method(config, task), clients=[3])
    broadcast = config.build_codec().encode(get_values(party.model, party.parameters))
    with pytest.raises(ValueError, match=r"client 4 is not one of this party's clients \(\[3\]\)"):
        party.fit(1, 4, broadcast)


def test_a_private_clients_reply_leaves_its_machine_without_metrics(task) -> None:
    config = preset_config("dp-lora", rounds=1, epsilon=4.0, val_limit=0)
    method = _bound_method(config, task)
    party = FederatedClient.build(config, task, method, clients=[3])
    broadcast = config.build_codec().encode(get_values(party.model, party.parameters))
    reply = party.fit(1, 3, broadcast)
    assert {"dp_clipped_sum_norm", "dp_noise_norm"} <= reply.metrics.keys()
    sent = reply.for_the_wire(private=method.privacy_declaration() is not None)
    assert sent.metrics == {}
    assert sent.message is reply.message and sent.num_examples == reply.num_examples
    assert reply.for_the_wire(private=False) is reply
