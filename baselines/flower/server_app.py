"""The Flower ``ServerApp``: the kit's round loop with each client's part sent to its SuperNode.

:class:`DeployedFederation` is :class:`~baselines.engine.simulation.FederatedSimulation` with
:meth:`~baselines.engine.simulation.FederatedSimulation.fit_round` sending the encoded broadcast to the node
of each sampled client (one message per client, as the log counts) and decoding their answers:
sampling, logging, aggregation, evaluation, the per-round commit of the run directory (and so
``--resume``), the privacy declaration and the submission are the in-process engine's own code.

A track-3 method's personalisation after the last round
(:meth:`~baselines.engine.simulation.FederatedSimulation.personalise_clients`) runs on the node of each
client (``train.personalise``: the final global model, logged as round R + 1 as in process), and
the node answers the client's state, from which the server writes the personal models; those
tensors are the submission, not a federated message, so they are not in the kit's log, and their
Flower bytes are in ``flower_messages.jsonl``.

Before round 1 the server discovers the nodes (``query.discover``: which clients each runs and a
summary of their data, :mod:`baselines.flower.federation`) and sends them the run's setup
(``query.setup``). Flower's own bytes around each message are measured and written to
``RUN_DIR/flower_messages.jsonl`` beside the kit's log.

A node that fails during a round (its SuperNode left the federation, its ``ClientApp`` raised, or
no answer within ``reply-timeout``) is reported (``RUN_DIR/flower_faults.jsonl`` and the
ServerApp's log) and the round follows ``on-failure``:

- ``fail`` (default): the run stops; the run directory holds the last completed round, and
  ``pflkit train --engine flower --resume`` continues from it once the node is back.
- ``drop``: the round aggregates the other clients' updates (the broadcast to the lost client is
  logged, its update is not; the round's metrics row lists it under ``dropped``); a client lost
  during the personalisation keeps the global model.
- ``wait``: the server waits (up to ``reply-timeout``) for a SuperNode running that client to
  join again, and sends it the same broadcast.

Run config (``flwr run --run-config`` or ``pflkit train --engine flower``): ``out`` (the run
directory, whose ``config.json`` the command wrote), ``num-clients``, ``on-failure``,
``reply-timeout`` and ``connect-timeout`` in seconds, ``resume``.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import torch
from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.serverapp import Grid, ServerApp

from baselines.config import TrainConfig
from baselines.core.task import FederatedTask
from baselines.engine.client import ClientReply
from baselines.engine.simulation import FederatedSimulation
from baselines.flower.federation import ClientSummary, with_summaries
from baselines.flower.records import (
    broadcast_content,
    client_reply,
    flower_bytes,
    personal_state,
    personalise_content,
    tensor_bytes,
)
from baselines.run_directory import RunDirectory
from baselines.wire import EncodedMessage

app = ServerApp()

POLICIES = ("fail", "drop", "wait")
#: seconds between two pulls of replies (Flower's own send_and_receive waits 3 s).
POLL_SECONDS = 0.1

Answer = TypeVar("Answer")


class FederationFault(RuntimeError):
    """A node failed and the run's policy is ``fail`` (or waiting ran out of time)."""


@dataclass(frozen=True)
class _Failure:
    """Why a client's node gave no usable answer."""

    reason: str


@dataclass(frozen=True)
class DeploymentSettings:
    """The ServerApp's run config.

    Attributes:
        out: the run directory (its ``config.json`` is the run's configuration).
        num_clients: K; the server waits for nodes covering clients 0..K-1.
        on_failure: ``fail``, ``drop`` or ``wait``.
        reply_timeout: seconds a round waits for a client's answer.
        connect_timeout: seconds the server waits for the nodes before round 1.
        resume: continue the run directory's last completed round.
    """

    out: Path
    num_clients: int
    on_failure: str = "fail"
    reply_timeout: float = 3600.0
    connect_timeout: float = 300.0
    resume: bool = False

    @classmethod
    def from_run_config(cls, run_config: dict[str, Any]) -> DeploymentSettings:
        """Read and check the run config.

        Raises:
            ValueError: for a missing ``out`` or ``num-clients`` or an unknown policy.
        """
        for key in ("out", "num-clients"):
            if key not in run_config:
                raise ValueError(
                    f"the run config needs {key!r} (pflkit train --engine flower sets it)"
                )
        settings = cls(
            out=Path(str(run_config["out"])),
            num_clients=int(run_config["num-clients"]),
            on_failure=str(run_config.get("on-failure", "fail")),
            reply_timeout=float(run_config.get("reply-timeout", 3600.0)),
            connect_timeout=float(run_config.get("connect-timeout", 300.0)),
            resume=bool(run_config.get("resume", False)),
        )
        if settings.on_failure not in POLICIES:
            raise ValueError(
                f"on-failure must be one of {', '.join(POLICIES)}, not {settings.on_failure!r}"
            )
        return settings


class Nodes:
    """Which SuperNode runs which client, found by asking every node that joins.

    Args:
        grid: Flower's grid.
        num_clients: K.
        report: called with a line for the ServerApp's log.
    """

    def __init__(self, grid: Grid, num_clients: int, report: Callable[[str], None]) -> None:
        self.grid = grid
        self.num_clients = num_clients
        self.report = report
        self.node_of: dict[int, int] = {}
        self.summaries: dict[int, ClientSummary] = {}
        self.asked: set[int] = set()
        self.setup_record: ConfigRecord | None = None

    def alive(self) -> set[int]:
        """Node ids connected now."""
        return set(self.grid.get_node_ids())

    def discover(self, timeout: float, wanted: set[int] | None = None) -> None:
        """Ask every node not asked yet for its clients, until ``wanted`` are covered.

        Args:
            timeout: seconds to wait.
            wanted: the clients needed (``None``: all of 0..K-1).

        Raises:
            FederationFault: when they are not covered within ``timeout``.
            ValueError: when a node reports a client outside 0..K-1 or one another node runs.
        """
        wanted = set(range(self.num_clients)) if wanted is None else wanted
        deadline = time.monotonic() + timeout
        while not wanted <= {k for k, n in self.node_of.items() if n in self.alive()}:
            new = sorted(self.alive() - self.asked)
            if new:
                self.asked.update(new)
                messages = [
                    Message(RecordDict(), dst_node_id=node, message_type="query.discover")
                    for node in new
                ]
                for reply in self.grid.send_and_receive(
                    messages, timeout=max(deadline - time.monotonic(), 1.0)
                ):
                    self._register(reply)
            if time.monotonic() > deadline:
                raise FederationFault(
                    f"clients {sorted(wanted - set(self.node_of))} have no SuperNode after "
                    f"{timeout:.0f} s (start them with `pflkit flower supernode --client K "
                    "--data DIR`)"
                )
            time.sleep(POLL_SECONDS)

    def _register(self, reply: Message) -> None:
        node = reply.metadata.src_node_id
        if reply.has_error():
            raise FederationFault(
                f"SuperNode {node} could not report its clients: {reply.error.reason}"
            )
        for text in reply.content["node"]["summaries"]:
            summary = ClientSummary.from_json(str(text))
            if not 0 <= summary.client < self.num_clients:
                raise ValueError(
                    f"SuperNode {node} runs client {summary.client}, outside the "
                    f"federation's clients 0..{self.num_clients - 1}"
                )
            previous = self.node_of.get(summary.client)
            if previous is not None and previous in self.alive() and previous != node:
                raise ValueError(
                    f"client {summary.client} is run by SuperNodes {previous} and "
                    f"{node}; start one SuperNode per client"
                )
            self.node_of[summary.client] = node
            self.summaries[summary.client] = summary
            self.report(
                f"client {summary.client}: SuperNode {node} ({summary.rows} questions, "
                f"{summary.providers} providers)"
            )
            if self.setup_record is not None:
                self._setup([node])

    def setup(self, config: TrainConfig, base: str) -> None:
        """Send every node the run's configuration, base and the clients' summaries."""
        self.setup_record = ConfigRecord(
            {
                "config": json.dumps(config.to_dict(), sort_keys=True),
                "base": base,
                "summaries": [self.summaries[k].to_json() for k in range(self.num_clients)],
            }
        )
        self._setup(sorted(set(self.node_of.values())))

    def _setup(self, nodes: list[int]) -> None:
        messages = [
            Message(
                RecordDict({"run": self.setup_record}), dst_node_id=node, message_type="query.setup"
            )
            for node in nodes
        ]
        replies = list(self.grid.send_and_receive(messages, timeout=600.0))
        failed = [r.metadata.src_node_id for r in replies if r.has_error()]
        if failed or len(replies) < len(messages):
            raise FederationFault(f"SuperNodes {failed or nodes} did not take the run's setup")


class DeployedFederation(FederatedSimulation):
    """The in-process engine's loop with the clients' part of each round on SuperNodes.

    Args:
        config, task, run_dir: as :class:`~baselines.engine.simulation.FederatedSimulation` (the task's
            clients are summaries: the server holds no client data).
        nodes: the discovered nodes (set up).
        settings: the failure policy and timeouts.
        report: called with a line for the ServerApp's log.
    """

    def __init__(
        self,
        config: TrainConfig,
        task: FederatedTask,
        run_dir: RunDirectory,
        *,
        nodes: Nodes,
        settings: DeploymentSettings,
        report: Callable[[str], None],
    ) -> None:
        method = config.build_method()
        if method.personal and not method.personalises():
            raise ValueError(
                f"{config.method!r} without personalisation builds each client's personal model "
                "from the state the rounds left it, which stays on the client's node; give it "
                "--finetune-epochs >= 1 or train it with the in-process engine"
            )
        super().__init__(config, task, run_dir, progress=False)
        self.nodes = nodes
        self.settings = settings
        self.report = report

    def fit_round(
        self, federated_round: int, clients: list[int], broadcast: EncodedMessage
    ) -> list[ClientReply | None]:
        """Send the broadcast to each sampled client's node and decode the answers."""
        names = self.parameters.names
        contents = {k: broadcast_content(broadcast, names, federated_round, [k]) for k in clients}
        answers = dict(
            self._ask(
                federated_round,
                contents,
                "train",
                broadcast.serialized_bytes,
                functools.partial(self._update, federated_round),
            )
        )
        return [answers[client] for client in clients]

    def personalise_clients(
        self,
        federated_round: int,
        clients: list[int],
        broadcast: EncodedMessage | None,
        weights: dict[str, torch.Tensor],
    ) -> Iterator[tuple[int, float]]:
        """Each client's personalisation on its node (all sent at once), in client order.

        The state a node answers is the client's personalisation, kept in ``self.client_states``
        for the submission (and committed with the run, so ``--resume`` keeps it). A client
        dropped by the ``drop`` policy keeps the global model (no state).
        """
        contents = {
            k: personalise_content(broadcast, self.parameters.names, federated_round, k)
            for k in clients
        }
        arrived: dict[int, tuple[dict[str, torch.Tensor], float] | None] = {}
        waiting = iter(clients)
        next_client = next(waiting, None)
        for client, answer in self._ask(
            federated_round,
            contents,
            "train.personalise",
            0 if broadcast is None else broadcast.serialized_bytes,
            functools.partial(self._personalisation, federated_round),
        ):
            arrived[client] = answer
            while next_client is not None and next_client in arrived:
                answer = arrived.pop(next_client)
                if answer is None:
                    self.client_states.pop(next_client, None)
                else:
                    self.client_states[next_client] = answer[0]
                yield next_client, 0.0 if answer is None else answer[1]
                next_client = next(waiting, None)

    def _ask(
        self,
        federated_round: int,
        contents: dict[int, RecordDict],
        message_type: str,
        payload_bytes: int,
        answer: Callable[[int, Message, float], Answer],
    ) -> Iterator[tuple[int, Answer | None]]:
        """Send each client's message to its node; yield each client's decoded answer as it
        comes, a failed one following the policy (``drop``: ``None``; ``wait``: sent again to a
        node that joins; ``fail``: :class:`FederationFault`)."""
        deadline = time.monotonic() + self.settings.reply_timeout
        left = dict(contents)
        while left:
            failed: list[int] = []
            for client, outcome in self._exchange(
                federated_round, left, message_type, payload_bytes, answer, deadline
            ):
                if not isinstance(outcome, _Failure):
                    yield client, outcome
                    continue
                self._fault(federated_round, client, outcome.reason)
                if self.settings.on_failure == "fail":
                    held = (
                        f"round {federated_round - 1}"
                        if federated_round <= self.config.rounds
                        else "every round and the clients personalised so far"
                    )
                    raise FederationFault(
                        f"round {federated_round}: client {client} failed ({outcome.reason}); "
                        f"the run directory holds {held}: restart the client's SuperNode and "
                        "continue with --resume (or choose --on-failure drop|wait)"
                    )
                if self.settings.on_failure == "drop":
                    yield client, None
                else:
                    failed.append(client)
            if failed:
                self.nodes.discover(max(deadline - time.monotonic(), 0.0), wanted=set(failed))
            left = {client: contents[client] for client in failed}

    def _exchange(
        self,
        federated_round: int,
        contents: dict[int, RecordDict],
        message_type: str,
        payload_bytes: int,
        answer: Callable[[int, Message, float], Answer],
        deadline: float,
    ) -> Iterator[tuple[int, Answer | _Failure]]:
        """One message per client to its node; each client's answer or failure as it comes."""
        grid = self.nodes.grid
        clients = list(contents)
        messages = {
            k: Message(
                contents[k],
                dst_node_id=self.nodes.node_of[k],
                message_type=message_type,
                group_id=str(federated_round),
            )
            for k in clients
        }
        sizes = {k: flower_bytes(message) for k, message in messages.items()}
        sent_at = time.monotonic()
        ids = dict(zip(clients, grid.push_messages([messages[k] for k in clients]), strict=True))
        for k in clients:
            self._framing(federated_round, -1, k, message_type, sizes[k], payload_bytes)
        client_of = {message_id: k for k, message_id in ids.items()}
        finished: set[int] = set()
        while len(finished) < len(clients):
            pending = [ids[k] for k in clients if k not in finished]
            for reply in grid.pull_messages(pending):
                k = client_of[reply.metadata.reply_to_message_id]
                finished.add(k)
                if reply.has_error():
                    yield k, _Failure(f"error {reply.error.code}: {reply.error.reason}")
                    continue
                try:
                    decoded = answer(k, reply, time.monotonic() - sent_at)
                except (KeyError, ValueError) as error:
                    yield k, _Failure(f"malformed answer: {error}")
                    continue
                yield k, decoded
            alive = self.nodes.alive()
            for k in clients:
                if k in finished:
                    continue
                if self.nodes.node_of[k] not in alive:
                    finished.add(k)
                    yield k, _Failure(f"its SuperNode {self.nodes.node_of[k]} left the federation")
                elif time.monotonic() > deadline:
                    finished.add(k)
                    yield k, _Failure(f"no answer within {self.settings.reply_timeout:.0f} s")
            time.sleep(POLL_SECONDS if len(finished) < len(clients) else 0)

    def _update(
        self, federated_round: int, client: int, reply: Message, exchange_seconds: float
    ) -> ClientReply:
        """A client's update from its node's answer (its Flower bytes noted)."""
        update, setup_seconds = client_reply(reply.content, client, self.parameters.names)
        self._framing(
            federated_round,
            client,
            -1,
            "train",
            flower_bytes(reply),
            update.message.serialized_bytes,
            setup_seconds=setup_seconds,
            train_seconds=update.seconds,
            exchange_seconds=exchange_seconds,
        )
        return update

    def _personalisation(
        self, federated_round: int, client: int, reply: Message, exchange_seconds: float
    ) -> tuple[dict[str, torch.Tensor], float]:
        """A client's personalised state and seconds from its node's answer.

        The state is the submission's, not a federated message: it is not in the kit's log
        (the in-process engine has nothing coming back either); its Flower bytes are noted in
        ``flower_messages.jsonl`` with the tensors' bytes as the payload.
        """
        state, seconds, setup_seconds = personal_state(reply.content)
        self._framing(
            federated_round,
            client,
            -1,
            "train.personalise",
            flower_bytes(reply),
            tensor_bytes(state),
            setup_seconds=setup_seconds,
            personalise_seconds=seconds,
            exchange_seconds=exchange_seconds,
        )
        return state, seconds

    def _framing(
        self,
        federated_round: int,
        sender: int,
        receiver: int,
        message_type: str,
        flower: int,
        payload: int,
        **seconds: float,
    ) -> None:
        """Note the bytes Flower sent for one message beside the kit's payload (and, for an
        answer, the node's setup and work time and the exchange's wall time)."""
        self._append(
            "flower_messages.jsonl",
            {
                "federated_round": federated_round,
                "sender": sender,
                "receiver": receiver,
                "message_type": message_type,
                "payload_bytes": payload,
                "flower_bytes": flower,
                "framing_bytes": flower - payload,
                **{key: round(value, 3) for key, value in seconds.items()},
            },
        )

    def _fault(self, federated_round: int, client: int, reason: str) -> None:
        line = (
            f"round {federated_round}: client {client} failed: {reason} "
            f"(policy: {self.settings.on_failure})"
        )
        self.report(line)
        self._append(
            "flower_faults.jsonl",
            {
                "federated_round": federated_round,
                "client": client,
                "reason": reason,
                "policy": self.settings.on_failure,
                "time": time.time(),
            },
        )

    def _append(self, name: str, row: dict[str, Any]) -> None:
        with open(self.run_dir.path / name, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(row, sort_keys=True) + "\n")


def server_task(
    saved: dict[str, Any], config: TrainConfig, summaries: dict[int, ClientSummary]
) -> FederatedTask:
    """The server's task: the base model, validation (from ``saved['data']`` when the run
    evaluates) and the clients' summaries in place of their data."""
    from baselines.engine.document_task import build_task

    task = build_task(
        saved["data"],
        saved["base"],
        val_limit=config.val_limit,
        eval_batch_size=config.eval_batch_size,
        progress=False,
        clients=[],
        num_clients=len(summaries),
    )
    return with_summaries(task, list(summaries.values()))


def run_federation(
    grid: Grid, settings: DeploymentSettings, report: Callable[[str], None]
) -> dict[str, Any]:
    """Discover the nodes, set them up and run the federation into ``settings.out``.

    Returns:
        The summary ``pflkit train`` prints.
    """
    run_dir = RunDirectory(settings.out)
    saved = run_dir.read_config()
    config = TrainConfig.from_dict(saved["config"])
    nodes = Nodes(grid, settings.num_clients, report)
    nodes.discover(settings.connect_timeout)
    nodes.setup(config, saved["base"])
    task = server_task(saved, config, nodes.summaries)
    federation = DeployedFederation(
        config, task, run_dir, nodes=nodes, settings=settings, report=report
    )
    summary = federation.run(resume=settings.resume)
    result = {"engine": "flower", **federation.run_record(summary)}
    (run_dir.path / "flower_summary.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Flower's entry point."""
    import logging

    from flwr.common.logger import log

    def report(line: str) -> None:
        log(logging.INFO, "%s", line)

    settings = DeploymentSettings.from_run_config(dict(context.run_config))
    report(json.dumps(run_federation(grid, settings, report)))
