"""The round loop of the in-process federated simulation.

Each round the strategy samples M of the K clients (seeded by the run's seed and the round), the
server broadcasts the current values of the communicated parameters through the channel (one
logged message per client), every sampled client loads what it decoded, computes its update with
the method (by default AdamW local epochs, optimiser rebuilt each round unless it declares
``persist_optimizer_state``) and sends it back through
the channel, and the strategy aggregates the decoded updates into the next global weights in full
precision. The server's part of a round is :class:`~baselines.engine.server.FederatedServer` and the
clients' part :class:`~baselines.engine.client.FederatedClient`; this loop calls them in one process, and
any other engine that calls them the same way produces the same log and weights. After each
round the global model is evaluated and the run directory is committed, so a run can be resumed
from its last completed round and ends in exactly the same state. What a method
keeps per client (``ClientJob.state``, the optimiser's persisted state included) is committed
with the round as well.

A method that personalises (``Method.personalises``, track 3) then gets every client's local work
after the last round: the server sends the final global model to each client (round R + 1 of the
log, downlink only; after 0 rounds the clients start from the base they hold and nothing is sent),
the client runs ``Method.personalise`` and the run directory is committed after each client, so
``--resume`` continues with the clients left and keeps the state of those done.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from baselines.config import TrainConfig
from baselines.core.client_update import ClientUpdate
from baselines.core.communication_log import CommunicationLog
from baselines.core.parameters import get_values, select_communicated, set_values
from baselines.core.task import FederatedTask
from baselines.engine.client import ClientReply, FederatedClient, build_trainer, client_seed
from baselines.engine.communication import SERVER, Channel
from baselines.engine.placement import place_model
from baselines.engine.server import FederatedServer
from baselines.methods import Method
from baselines.run_directory import RunDirectory, RunState
from baselines.submission import write_submission
from baselines.wire import EncodedMessage

__all__ = ["FederatedSimulation", "RunSummary", "client_seed"]


@dataclass
class RunSummary:
    """The outcome of a run.

    Attributes:
        rounds: completed rounds.
        metrics: one dictionary per round.
        total_bytes: sum of ``amount_of_bytes`` over all messages.
        bytes_per_message: ``amount_of_bytes`` of one message (all messages of a run carry the
            same tensors, so they have the same size).
        communicated_parameters: values per full message.
        timing: cumulative seconds (``wall``, ``client_training``, ``evaluation``, and
            ``personalisation`` when the method personalises).
        submission: the content of ``submission.json``.
    """

    rounds: int
    metrics: list[dict[str, Any]]
    total_bytes: int
    bytes_per_message: int
    communicated_parameters: int
    timing: dict[str, float]
    submission: dict[str, Any]

    @property
    def overhead(self) -> float:
        """Wall time of the run / time spent in client training (personalisation included)."""
        training = self.timing["client_training"] + self.timing.get("personalisation", 0.0)
        return self.timing["wall"] / max(training, 1e-9)


class FederatedSimulation:
    """Runs a configured federation on a task, writing everything into a run directory.

    Args:
        config: the run's configuration.
        task: model and data.
        run_dir: where logs, state and the submission go.
        progress: show progress bars (per round and per client).
        method: a method object to use instead of the configured one (for methods built in code).

    Raises:
        ValueError: when the configuration does not fit the task (e.g. more clients per round
            than clients, a LoRA target that matches nothing), before any training.
    """

    def __init__(
        self,
        config: TrainConfig,
        task: FederatedTask,
        run_dir: RunDirectory,
        *,
        progress: bool = True,
        method: Method | None = None,
    ) -> None:
        self.config = config
        self.task = task
        self.run_dir = run_dir
        self.progress = progress
        if config.clients_per_round > task.num_clients:
            raise ValueError(
                f"--clients-per-round {config.clients_per_round} exceeds the {task.num_clients} "
                f"clients of the data; use at most {task.num_clients}"
            )
        self.method = config.build_method() if method is None else method
        self.method.bind(task)
        self.channel = Channel(config.build_codec(), CommunicationLog())
        self.server = FederatedServer(
            config.build_strategy(), self.channel, num_clients=task.num_clients, seed=config.seed
        )
        self.strategy = self.server.strategy
        self.model = place_model(self.method.prepare(task.build_model(), seed=config.seed), config)
        self.parameters = select_communicated(self.model, prefix=self.method.prefix)
        self.trainer = build_trainer(config, task, progress=progress, private=self.method.private)
        #: client id -> the method's state for that client (saved with every round).
        self.client_states: dict[int, dict[str, torch.Tensor]] = {}
        self.clients = FederatedClient(
            seed=config.seed,
            method=self.method,
            model=self.model,
            parameters=self.parameters,
            trainer=self.trainer,
            codec=self.channel.codec,
            data=dict(enumerate(task.client_data)),
            states=self.client_states,
        )

    def run_record(self, summary: RunSummary) -> dict[str, Any]:
        """The run's headline figures, as ``pflkit train`` prints them."""
        return {
            "run_dir": str(self.run_dir.path),
            "rounds": summary.rounds,
            "bytes_per_message": summary.bytes_per_message,
            "total_bytes": summary.total_bytes,
            "official_logger_total_bytes": self.channel.log.official_logger_total(),
            "val_anls": summary.metrics[-1].get("val_anls") if summary.metrics else None,
            "wall_seconds": round(summary.timing["wall"], 2),
            "engine_overhead": round(summary.overhead, 3),
        }

    def run(self, *, resume: bool = False) -> RunSummary:
        """Run (or continue) the federation and write the submission.

        Args:
            resume: continue from the run directory's last completed round.

        Returns:
            The run's summary.
        """
        from tqdm.auto import tqdm

        started = time.perf_counter()
        weights = get_values(self.model, self.parameters)
        metrics: list[dict[str, Any]] = []
        timing = {"wall": 0.0, "client_training": 0.0, "evaluation": 0.0}
        first_round = 1
        personalised: list[int] = []
        if resume and self.run_dir.has_state():
            state = self.run_dir.load_state()
            weights = {name: state.weights[name] for name in self.parameters.names}
            self.strategy.load_state_dict(state.strategy_state)
            self.channel.log = state.log
            self.client_states = state.client_states
            self.clients.states = self.client_states
            metrics = state.metrics
            timing = dict(state.timing)
            first_round = state.federated_round + 1
            personalised = state.personalised
            if personalised and self.config.rounds > state.federated_round:
                raise ValueError(
                    f"{self.run_dir.path}: clients were personalised after round "
                    f"{state.federated_round}; --resume cannot add rounds to this run"
                )
        set_values(self.model, self.parameters, weights)
        prior_wall = timing["wall"]
        rounds = tqdm(
            range(first_round, self.config.rounds + 1),
            desc="rounds",
            initial=first_round - 1,
            total=self.config.rounds,
            disable=not self.progress,
            unit="round",
        )

        def commit(federated_round: int) -> None:
            timing["wall"] = prior_wall + time.perf_counter() - started
            self.run_dir.commit_round(
                RunState(
                    federated_round=federated_round,
                    weights=weights,
                    strategy_state=self.strategy.state_dict(),
                    log=self.channel.log,
                    metrics=metrics,
                    timing=timing,
                    client_states=self.client_states,
                    personalised=personalised,
                )
            )

        for federated_round in rounds:
            weights, row = self._round(federated_round, weights, timing)
            metrics.append(row)
            row["wall_seconds"] = prior_wall + time.perf_counter() - started
            row["client_training_seconds"] = timing["client_training"]
            row["evaluation_seconds"] = timing["evaluation"]
            commit(federated_round)
            if "val_anls" in row:
                rounds.set_postfix(val_anls=f"{row['val_anls']:.4f}")
        rounds.close()
        if self.method.personalises():
            for client in self._personalise(weights, personalised, timing):
                personalised.append(client)
                commit(self.config.rounds)
        self.run_dir.write_logs(self.channel.log, metrics)
        timing["wall"] = prior_wall + time.perf_counter() - started
        submission = write_submission(
            self.run_dir,
            config=self.config,
            method=self.method,
            model=self.model,
            log=self.channel.log,
            metrics=metrics,
            num_clients=self.task.num_clients,
            save_model=self.task.save_model,
            info={
                **self.task.info,
                "communicated_parameters": self.parameters.numel,
                "timing": timing,
            },
            personal_model=self.personal_model if self.method.personal else None,
        )
        messages = self.channel.log.records
        return RunSummary(
            rounds=self.config.rounds,
            metrics=metrics,
            total_bytes=self.channel.log.total_bytes(),
            bytes_per_message=messages[0].amount_of_bytes if messages else 0,
            communicated_parameters=self.parameters.numel,
            timing=timing,
            submission=submission,
        )

    def personal_model(self, client: int) -> nn.Module:
        """A client's personal model after the run, as its method defines it.

        Args:
            client: the client id.

        Returns:
            A copy of the prepared model with the global weights, personalised by
            :meth:`~baselines.methods.base.Method.personal_model` from the client's state.

        Raises:
            ValueError: for a client id outside the federation.
        """
        if not 0 <= client < self.task.num_clients:
            raise ValueError(f"client {client} is not in 0..{self.task.num_clients - 1}")
        return self.method.personal_model(
            copy.deepcopy(self.model).cpu(), self.client_states.get(client, {})
        )

    def _personalise(
        self, weights: dict[str, torch.Tensor], done: list[int], timing: dict[str, float]
    ) -> Iterator[int]:
        """Every client not in ``done`` runs ``Method.personalise``; yields each when finished.

        The final global weights are sent to each client as round R + 1 (after 0 rounds the
        clients hold them already: the base, and nothing is sent), logged when the client is
        done, in client order; the weights are back in the model at the end.
        """
        federated_round = self.config.rounds + 1
        broadcast = self.channel.encode(weights) if self.config.rounds > 0 else None
        left = [client for client in range(self.task.num_clients) if client not in done]
        for client, seconds in self.personalise_clients(federated_round, left, broadcast, weights):
            if broadcast is not None:
                self.channel.record(
                    broadcast, federated_round=federated_round, sender=SERVER, receiver=client
                )
            timing["personalisation"] = timing.get("personalisation", 0.0) + seconds
            yield client
        set_values(self.model, self.parameters, weights)

    def personalise_clients(
        self,
        federated_round: int,
        clients: list[int],
        broadcast: EncodedMessage | None,
        weights: dict[str, torch.Tensor],
    ) -> Iterator[tuple[int, float]]:
        """Each client's personalisation, yielded in the order of ``clients`` with its seconds.

        In process: each client's :meth:`FederatedClient.personalise` in turn, its result in
        ``self.client_states``. Another engine (the Flower ``ServerApp``) overrides this to run
        it on the clients' nodes and put the states they send back into ``self.client_states``.

        Args:
            federated_round: R + 1.
            clients: the clients left to personalise.
            broadcast: the final global weights as encoded for the clients (``None`` after 0
                rounds: each client starts from the base it holds, ``weights``).
            weights: the final global weights.
        """
        from tqdm.auto import tqdm

        for client in tqdm(clients, desc="personalising", unit="client", disable=not self.progress):
            received = weights if broadcast is None else self.channel.codec.decode(broadcast)
            yield client, self.clients.personalise(federated_round, client, received)

    def fit_round(
        self, federated_round: int, clients: list[int], broadcast: EncodedMessage
    ) -> list[ClientReply | None]:
        """Every sampled client's reply to the broadcast, in the order of ``clients``.

        In process: each client's :meth:`FederatedClient.fit` in turn. Another engine (the Flower
        ``ServerApp``) overrides this to send the broadcast to the clients' nodes instead; it
        answers ``None`` for a client it dropped (its node failed and the run's policy is to
        drop): the broadcast is logged, the round aggregates the others' updates.
        """
        return [self.clients.fit(federated_round, client, broadcast) for client in clients]

    def _round(
        self, federated_round: int, weights: dict[str, torch.Tensor], timing: dict[str, float]
    ) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """One federated round; returns the new global weights and the round's metrics row."""
        server = self.server
        clients = server.sample(federated_round)
        log_start = len(self.channel.log.records)
        broadcast = server.broadcast(weights)
        results: list[ClientUpdate] = []
        dropped: list[int] = []
        for client, reply in zip(
            clients, self.fit_round(federated_round, clients, broadcast), strict=True
        ):
            if reply is None:
                server.lost(federated_round, client, broadcast)
                dropped.append(client)
                continue
            timing["client_training"] += reply.seconds
            results.append(
                server.receive(
                    federated_round,
                    client,
                    broadcast,
                    reply.message,
                    reply.num_examples,
                    reply.metrics,
                )
            )
        if not results:
            raise RuntimeError(
                f"round {federated_round}: every sampled client ({clients}) was dropped; the "
                f"run stays at round {federated_round - 1} (continue it with --resume)"
            )
        weights = server.aggregate(federated_round, weights, results)
        set_values(self.model, self.parameters, weights)
        row = server.round_row(federated_round, clients, results, log_start)
        if dropped:
            row["dropped"] = dropped
        if self.task.evaluate is not None:
            tic = time.perf_counter()
            scores = self.task.evaluate(self.method.inference_model(self.model))
            timing["evaluation"] += time.perf_counter() - tic
            row.update({f"val_{key}": value for key, value in scores.items()})
        return weights, row
