"""The Flower ``ClientApp``: a node runs :class:`~baselines.engine.client.FederatedClient` on its clients.

A SuperNode is started with ``--node-config 'clients="K" data="DIR"'`` (``pflkit flower
supernode --client K --data DIR`` writes it) and reads only those clients' training files (in
Flower's simulation engine, node ``partition-id`` runs that client). Three message types reach
it:

- ``query.discover``: it answers a :class:`~baselines.flower.federation.ClientSummary` per client
  (rows and number of providers), which the server needs to bind the method (DP calibration).
- ``query.setup``: the run's configuration, base and every client's summary; kept in
  ``Context.state``, which Flower keeps per node and run.
- ``train``: the round's broadcast (the kit's encoded message) and which of the node's clients
  were sampled; it answers each one's encoded update (:meth:`FederatedClient.fit`).
- ``train.personalise`` (track 3, after the last round): the final global model (nothing after 0
  rounds) and one client; the client runs :meth:`FederatedClient.personalise` and the node
  answers the client's state, from which the server builds its personal model.

What the method keeps per client (``ClientJob.state``) is kept in ``Context.state`` between
rounds as well, so a node keeps it whether Flower runs the app in one process or a fresh one per
message. The personalisation starts from that state and does not write its result back, so a
personalisation repeated (the run resumed after a fault) starts from the rounds' state again.
A node that is sent a client it does not hold answers an error (the server reports it).
"""

from __future__ import annotations

import json
import time
from typing import Any

from flwr.app import ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp

from baselines.config import TrainConfig
from baselines.engine.client import FederatedClient
from baselines.flower.federation import ClientSummary, parse_clients, party_task
from baselines.flower.records import (
    WIRE,
    personal_content,
    reply_content,
    wire_message,
)

app = ClientApp()

#: record of ``Context.state`` holding the run's setup.
SETUP = "setup"

#: (run id, node id, setup) -> the node's party, while the app's process lives (one process
#: may serve several nodes: the simulation engine's actors do).
_PARTIES: dict[tuple[int, int, str], FederatedClient] = {}


def _node(context: Context) -> tuple[list[int], str]:
    """The node's clients and data directory, from its node config.

    A deployed node has ``clients`` and ``data`` (``pflkit flower supernode``). A node of
    Flower's simulation engine has only ``partition-id``: it runs that client of the run's
    data directory (``config.json`` in the run directory ``out`` of the run config).
    """
    config = context.node_config
    if "clients" in config and "data" in config:
        return parse_clients(str(config["clients"])), str(config["data"])
    if "partition-id" in config and context.run_config.get("out"):
        from baselines.run_directory import RunDirectory

        saved = RunDirectory(str(context.run_config["out"])).read_config()
        return [int(config["partition-id"])], str(saved["data"])
    raise ValueError(
        "this SuperNode has no clients/data in its node config: start it with "
        "`pflkit flower supernode --client K --data DIR`"
    )


@app.query("discover")
def discover(message: Message, context: Context) -> Message:
    """Answer the node's clients and a summary of each one's data."""
    from benchmark.data.reader import load_split

    clients, data_dir = _node(context)
    summaries = []
    for client in clients:
        summaries.append(ClientSummary.of(client, load_split(data_dir, "train", client)).to_json())
    return Message(RecordDict({"node": ConfigRecord({"summaries": summaries})}), reply_to=message)


@app.query("setup")
def setup(message: Message, context: Context) -> Message:
    """Keep the run's setup in the node's state."""
    context.state[SETUP] = ConfigRecord(dict(message.content["run"]))
    return Message(RecordDict(), reply_to=message)


def _party(context: Context) -> tuple[FederatedClient, float]:
    """The node's :class:`FederatedClient` for this run (built once per process), and the
    seconds spent building it now."""
    tic = time.perf_counter()
    setup_record = context.state[SETUP]
    key = (context.run_id, context.node_id, str(setup_record["config"]))
    party = _PARTIES.get(key)
    if party is None:
        clients, data_dir = _node(context)
        config = TrainConfig.from_dict(json.loads(str(setup_record["config"])))
        summaries = [ClientSummary.from_json(text) for text in setup_record["summaries"]]
        base = str(context.node_config.get("base", setup_record["base"]))
        task = party_task(data_dir, base, clients=clients, summaries=summaries)
        method = config.build_method()
        method.bind(task)
        party = FederatedClient.build(config, task, method, clients=clients)
        _PARTIES.clear()
        _PARTIES[key] = party
    for client in party.data:
        if _state_record(client) in context.state and client not in party.states:
            party.states[client] = _tensors(context.state[_state_record(client)])
    return party, time.perf_counter() - tic


def _state_record(client: int) -> str:
    """The ``Context.state`` record of a client's method state."""
    return f"state.{client}"


def _tensors(record: Any) -> dict[str, Any]:
    """A client's saved state from its ``ArrayRecord``."""
    return dict(record.to_torch_state_dict())


@app.train()
def train(message: Message, context: Context) -> Message:
    """Each sampled client of the node decodes the broadcast, trains and encodes its update."""
    party, setup_seconds = _party(context)
    names = party.parameters.names
    federated_round = int(message.content["round"]["round"])
    clients = [int(k) for k in message.content["round"]["clients"]]
    broadcast = wire_message(message.content, WIRE, names)
    private = party.method.privacy_declaration() is not None
    replies = {
        client: party.fit(federated_round, client, broadcast).for_the_wire(private)
        for client in clients
    }
    for client in clients:
        state = party.states.get(client)
        if state:
            context.state[_state_record(client)] = ArrayRecord(
                {name: tensor.detach().cpu().contiguous() for name, tensor in state.items()}
            )
    return Message(reply_content(replies, names, setup_seconds), reply_to=message)


@app.train("personalise")
def personalise(message: Message, context: Context) -> Message:
    """A client's personalisation from the final global model (the base it holds after 0
    rounds) and the state the rounds left it; answers the resulting state."""
    party, setup_seconds = _party(context)
    federated_round = int(message.content["round"]["round"])
    (client,) = (int(k) for k in message.content["round"]["clients"])
    record = _state_record(client)
    party.states[client] = _tensors(context.state[record]) if record in context.state else {}
    if WIRE in message.content:
        received = party.codec.decode(
            wire_message(message.content, WIRE, party.parameters.names)
        )
    else:
        received = party.held_weights()
    seconds = party.personalise(federated_round, client, received)
    return Message(personal_content(party.states[client], seconds, setup_seconds), reply_to=message)
