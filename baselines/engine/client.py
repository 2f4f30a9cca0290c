"""The client side of a round: decode what the server sent, compute the update, encode it.

:class:`FederatedClient` is what one party runs. The in-process engine
(:class:`baselines.engine.simulation.FederatedSimulation`) holds one for every client of the federation;
a Flower ``ClientApp`` (:mod:`baselines.flower.client_app`) holds one for the single client whose
files its node reads. Both call :meth:`FederatedClient.fit` with the server's encoded message and
send back the encoded message it returns, so both engines train, seed and serialise alike; after
the last round both call :meth:`FederatedClient.personalise` for a track-3 method.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from baselines.config import TrainConfig
from baselines.core.client_job import ClientJob
from baselines.core.parameters import (
    CommunicatedParameters,
    get_values,
    select_communicated,
    set_values,
)
from baselines.engine.communication import encode_message
from baselines.engine.local_training import (
    LocalTrainer,
    chain_step_hooks,
    clip_grad_norm,
    clip_grad_value,
)
from baselines.engine.placement import place_model
from baselines.methods import Method
from baselines.wire import EncodedMessage, WireCodec

if TYPE_CHECKING:
    from datasets import Dataset

    from baselines.core.task import FederatedTask


def client_seed(seed: int, federated_round: int, client: int) -> int:
    """The seed of one client in one round, derived from the run's seed."""
    return int(np.random.SeedSequence([seed, federated_round, client]).generate_state(1)[0])


@dataclass
class ClientReply:
    """What a client sends back in a round, encoded, and what it measured.

    Attributes:
        message: the update as it travels (the method's delta through the wire codec).
        num_examples: the aggregation weight the method declared.
        metrics: the method's numbers about local training (loss, steps).
        seconds: wall time of the method's ``compute_update``.
    """

    message: EncodedMessage
    num_examples: int
    metrics: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0

    def for_the_wire(self, private: bool) -> ClientReply:
        """The reply as it may leave the client's machine.

        A private method's metrics (training loss, update norms, the clipped sum's norm) are
        computed from its providers' data without noise: sent to the server, they would be
        a release outside the declared guarantee. So a private method's reply crosses a
        real network with its noised update and no metrics; the in-process simulation,
        where every party is one trusted process, keeps them as diagnostics.
        """
        return replace(self, metrics={}) if private else self


def build_trainer(
    config: TrainConfig, task: FederatedTask, *, progress: bool, private: bool
) -> LocalTrainer:
    """The local optimisation loop of the run's configuration.

    Args:
        config: the run's configuration.
        task: gives the collate function and the length column.
        progress: show per-client progress bars.
        private: the method protects providers (it may not keep optimiser state).

    Raises:
        ValueError: for ``--persist-optimizer-state`` with a private method.
    """
    optimizer = config.build_optimizer()
    if optimizer.persistent and private:
        raise ValueError(
            f"--persist-optimizer-state does not apply to the private method "
            f"{config.method!r}: each provider's update must start from a fresh optimiser, "
            "or one provider's data would reach another's update past the clipping"
        )
    return LocalTrainer(
        task.collate,
        epochs=config.local_epochs,
        batch_size=config.batch_size,
        optimizer=optimizer,
        step_hook=chain_step_hooks(
            None
            if optimizer.local.max_grad_value is None
            else clip_grad_value(optimizer.local.max_grad_value),
            None if config.max_grad_norm is None else clip_grad_norm(config.max_grad_norm),
        ),
        progress=progress,
        length_column=task.length_column,
        precision=config.precision,
        prefetch=task.prefetch,
    )


class FederatedClient:
    """One or more clients' side of the federation.

    Args:
        seed: the run's seed (each round's client seed derives from it).
        method: the bound method.
        model: the prepared model (shared with the server in the in-process engine).
        parameters: the communicated set of ``model``.
        trainer: the local optimisation loop.
        codec: the wire format of the messages.
        data: client id -> its local data (only the clients this party runs).
        states: client id -> the method's state for that client (saved with the run).
    """

    def __init__(
        self,
        *,
        seed: int,
        method: Method,
        model: nn.Module,
        parameters: CommunicatedParameters,
        trainer: LocalTrainer,
        codec: WireCodec,
        data: Mapping[int, Dataset],
        states: dict[int, dict[str, torch.Tensor]],
    ) -> None:
        self.seed = seed
        self.method = method
        self.model = model
        self.parameters = parameters
        self.trainer = trainer
        self.codec = codec
        self.data = data
        self.states = states

    @classmethod
    def build(
        cls,
        config: TrainConfig,
        task: FederatedTask,
        method: Method,
        *,
        clients: list[int],
        progress: bool = False,
    ) -> FederatedClient:
        """A party of its own: a fresh model prepared from the run's seed, holding ``clients``.

        What a node of a deployed federation builds (only its own client's data); the adapters
        come from the shared seed, so every party starts from the same weights.

        Args:
            config: the run's configuration.
            task: the model and the party's data (``task.client_data[k]`` for each held ``k``).
            method: the method, bound to the federation.
            clients: the client ids this party runs.
            progress: show per-client progress bars.
        """
        model = place_model(method.prepare(task.build_model(), seed=config.seed), config)
        return cls(
            seed=config.seed,
            method=method,
            model=model,
            parameters=select_communicated(model, prefix=method.prefix),
            trainer=build_trainer(config, task, progress=progress, private=method.private),
            codec=config.build_codec(),
            data={k: task.client_data[k] for k in clients},
            states={},
        )

    def job(
        self, federated_round: int, client: int, received: dict[str, torch.Tensor]
    ) -> ClientJob:
        """A client's job with the weights it received loaded into the model.

        Raises:
            ValueError: for a client whose data this party does not hold.
        """
        if client not in self.data:
            raise ValueError(
                f"client {client} is not one of this party's clients ({sorted(self.data)}); "
                "start the node with that client's data"
            )
        set_values(self.model, self.parameters, received)
        job = ClientJob(
            federated_round=federated_round,
            client=client,
            model=self.model,
            parameters=self.parameters,
            start_weights=received,
            dataset=self.data[client],
            trainer=self.trainer,
            seed=client_seed(self.seed, federated_round, client),
            state=self.states.setdefault(client, {}),
        )
        job.loss = functools.partial(self.method.local_loss, job)
        return job

    def fit(self, federated_round: int, client: int, broadcast: EncodedMessage) -> ClientReply:
        """Decode the server's message, compute the method's update and encode it.

        Args:
            federated_round: 1-based round.
            client: the client id.
            broadcast: the global weights as the server encoded them.

        Returns:
            The encoded update with its weight, metrics and training time.
        """
        received = self.codec.decode(broadcast)
        job = self.job(federated_round, client, received)
        self.trainer.description = f"round {federated_round} client {client}"
        tic = time.perf_counter()
        update = self.method.compute_update(job)
        seconds = time.perf_counter() - tic
        return ClientReply(
            encode_message(self.codec, update.delta), update.num_examples, update.metrics, seconds
        )

    def held_weights(self) -> dict[str, torch.Tensor]:
        """The communicated values the party's model holds now (after 0 rounds: the base)."""
        return get_values(self.model, self.parameters)

    def personalise(
        self, federated_round: int, client: int, received: dict[str, torch.Tensor]
    ) -> float:
        """A client's local work after the last round (``Method.personalise``), from ``received``.

        The result stays in the client's state (``self.states[client]``), which is what its
        personal model is built from. The model is left holding ``received``, so the next client
        of this party starts from the same weights (after 0 rounds nothing is sent and a node
        personalises from :meth:`held_weights`).

        Args:
            federated_round: R + 1 (the round the final global model is sent in).
            client: the client id.
            received: the final global weights as the client decoded them (the base after 0
                rounds).

        Returns:
            Wall seconds of the method's personalisation.
        """
        job = self.job(federated_round, client, received)
        self.trainer.description = f"personalising client {client}"
        tic = time.perf_counter()
        self.method.personalise(job)
        seconds = time.perf_counter() - tic
        set_values(self.model, self.parameters, received)
        return seconds
