"""The parts of the Flower engine that do not need flwr (the main environment has none).

The summaries a server learns of remote clients bind a DP method exactly as their data does, a
node's task holds only its own clients' data, a dropped client is logged as sent and not
received, a personalisation run by a party of its own (as a node runs it) gives the in-process
personal tensors, the SuperLink connection file keeps other entries, and without flwr the commands say
to run `make flower-setup`.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from baselines.core.task import FederatedTask
from baselines.engine.client import ClientReply, FederatedClient
from baselines.engine.document_task import build_task
from baselines.engine.simulation import FederatedSimulation
from baselines.flower.federation import ClientSummary, parse_clients, party_task, with_summaries
from baselines.presets import preset_config
from baselines.privacy.plan import min_providers
from baselines.run_directory import RunDirectory
from baselines.wire import EncodedMessage


@pytest.fixture(scope="module")
def task(tiny_data: Path, tiny_base: Path) -> FederatedTask:
    return build_task(tiny_data, tiny_base, val_limit=0, progress=False)


def test_summaries_bind_a_dp_method_as_the_clients_data_does(task: FederatedTask) -> None:
    summaries = [ClientSummary.of(k, data) for k, data in enumerate(task.client_data)]
    assert [s.rows for s in summaries] == [len(data) for data in task.client_data]
    assert min_providers([s["provider"] for s in summaries]) == min_providers(
        [data["provider"] for data in task.client_data]
    )
    assert ClientSummary.from_json(summaries[3].to_json()) == summaries[3]

    config = preset_config("dp-lora", rounds=1, epsilon=4.0, val_limit=0)
    server_side = with_summaries(
        FederatedTask(
            build_model=task.build_model,
            collate=task.collate,
            client_data=[None] * task.num_clients,
            evaluate=None,
            save_model=task.save_model,
        ),
        summaries,
    )
    local, remote = config.build_method(), config.build_method()
    local.bind(task)
    remote.bind(server_side)
    assert remote.privacy_declaration() == local.privacy_declaration()


def test_a_client_without_providers_is_refused_from_its_summary() -> None:
    summary = ClientSummary(client=2, rows=5, providers=1, unlabelled=2)
    with pytest.raises(ValueError, match="client 0 has training rows without a provider"):
        min_providers([summary["provider"]])
    with pytest.raises(KeyError, match="no column 'question'"):
        summary["question"]


def test_a_node_reads_only_its_own_clients(
    task: FederatedTask, tiny_data: Path, tiny_base: Path
) -> None:
    summaries = [ClientSummary.of(k, data) for k, data in enumerate(task.client_data)]
    node = party_task(tiny_data, str(tiny_base), clients=[2, 5], summaries=summaries)
    node_view = build_task(tiny_data, tiny_base, val_limit=0, progress=False, clients=[2, 5])
    assert node.num_clients == task.num_clients
    assert [type(data) is ClientSummary for data in node.client_data] == [
        k not in (2, 5) for k in range(task.num_clients)
    ]
    assert node.client_data[5]["question"] == task.client_data[5]["question"]
    with pytest.raises(ValueError, match="no node reported clients \\[4\\]"):
        with_summaries(node_view, [s for s in summaries if s.client != 4])


@pytest.mark.parametrize(
    ("text", "clients"),
    [("3", [3]), ("0,1,2", [0, 1, 2]), ("4-6", [4, 5, 6]), ("7-9,0", [0, 7, 8, 9])],
)
def test_node_client_lists(text: str, clients: list[int]) -> None:
    assert parse_clients(text) == clients


@pytest.mark.parametrize("text", ["", "a", "1-", "-2", "1;2"])
def test_bad_node_client_lists_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="--client takes ids"):
        parse_clients(text)


class DroppingSimulation(FederatedSimulation):
    """The in-process loop where the engine lost some clients (their node failed)."""

    def __init__(self, *args, lost: set[int], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.lost = lost

    def fit_round(
        self, federated_round: int, clients: list[int], broadcast: EncodedMessage
    ) -> list[ClientReply | None]:
        return [
            None if k in self.lost else self.clients.fit(federated_round, k, broadcast)
            for k in clients
        ]


def test_a_dropped_client_is_logged_as_sent_and_left_out(
    task: FederatedTask, tmp_path: Path
) -> None:
    config = preset_config("lora", rounds=1, clients_per_round=3, local_epochs=1, val_limit=0)
    sampled = config.build_strategy().configure_fit(1, task.num_clients, seed=config.seed)
    run = DroppingSimulation(
        config, task, RunDirectory(tmp_path / "run"), progress=False, lost={sampled[1]}
    )
    summary = run.run()
    rows = [(r.sender, r.receiver) for r in run.channel.log.records]
    assert rows == [
        (-1, sampled[0]),
        (sampled[0], -1),
        (-1, sampled[1]),
        (-1, sampled[2]),
        (sampled[2], -1),
    ]
    assert summary.metrics[0]["dropped"] == [sampled[1]]
    assert summary.metrics[0]["examples"] == sum(
        len(task.client_data[k]) for k in (sampled[0], sampled[2])
    )

    everyone = DroppingSimulation(
        config, task, RunDirectory(tmp_path / "lost"), progress=False, lost=set(sampled)
    )
    with pytest.raises(
        RuntimeError, match="every sampled client .* was dropped; the run stays at round 0"
    ):
        everyone.run()


class RemotePersonalisation(FederatedSimulation):
    """The in-process loop whose clients personalise on parties of their own, built as a
    Flower node builds its party, their states copied back as a node answers them."""

    def personalise_clients(
        self,
        federated_round: int,
        clients: list[int],
        broadcast: EncodedMessage | None,
        weights: dict[str, torch.Tensor],
    ) -> Iterator[tuple[int, float]]:
        for client in clients:
            party = FederatedClient.build(self.config, self.task, self.method, clients=[client])
            received = party.held_weights() if broadcast is None else party.codec.decode(broadcast)
            seconds = party.personalise(federated_round, client, received)
            self.client_states[client] = party.states[client]
            yield client, seconds


@pytest.mark.parametrize(("preset", "rounds"), [("fedavg-ft", 1), ("local-only", 0)])
def test_a_personalisation_on_its_own_party_equals_the_in_process_one(
    preset: str, rounds: int, task: FederatedTask, tmp_path: Path
) -> None:
    config = preset_config(preset, rounds=rounds, local_epochs=1, finetune_epochs=1, val_limit=0)
    runs = [
        engine(config, task, RunDirectory(tmp_path / engine.__name__), progress=False)
        for engine in (FederatedSimulation, RemotePersonalisation)
    ]
    for run in runs:
        run.run()
    here, remote = runs
    assert remote.channel.log.to_jsonl() == here.channel.log.to_jsonl()
    assert here.client_states.keys() == remote.client_states.keys() == set(range(10))
    for client, state in here.client_states.items():
        assert state.keys() == remote.client_states[client].keys()
        for name, value in state.items():
            torch.testing.assert_close(remote.client_states[client][name], value, rtol=0, atol=1e-6)


def test_the_connection_file_keeps_other_connections(tmp_path: Path, monkeypatch) -> None:
    from baselines.flower.cli import write_connection

    monkeypatch.setenv("FLWR_HOME", str(tmp_path))
    (tmp_path / "config.toml").write_text(
        '[superlink]\ndefault = "local"\n\n[superlink.local]\naddress = ":local:"\n\n'
        "[superlink.local.options]\nnum-supernodes = 10\n"
    )
    ca = tmp_path / "ca.crt"
    ca.write_text("CA")
    path = write_connection("prod", "10.0.0.5:9092", insecure=False, root_certificates=str(ca))
    data = tomllib.loads(path.read_text())
    assert data["superlink"]["default"] == "local"
    assert data["superlink"]["local"] == {"address": ":local:", "options": {"num-supernodes": 10}}
    assert data["superlink"]["prod"] == {
        "address": "10.0.0.5:9092",
        "insecure": False,
        "root-certificates": str(ca),
    }


def test_without_flwr_the_commands_name_flower_setup(tmp_path: Path, tiny_data: Path) -> None:
    pytest.importorskip("pflkit")
    try:
        import flwr  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("flwr is installed here (.venv-flower)")
    from pflkit.cli import main

    runner = CliRunner()
    node = runner.invoke(main, ["flower", "supernode", "--client", "1", "--data", str(tiny_data)])
    assert node.exit_code == 1 and "make flower-setup" in node.output
    train = runner.invoke(
        main,
        [
            "train",
            "--engine",
            "flower",
            "--preset",
            "lora",
            "--data",
            str(tiny_data),
            "--out",
            str(tmp_path / "run"),
        ],
    )
    assert train.exit_code == 1 and "make flower-setup" in train.output
    assert not (tmp_path / "run" / "config.json").exists()
