"""The server side of a round: sample, encode the broadcast, log, decode and aggregate.

:class:`FederatedServer` holds the strategy and the channel (with the communication log). The
in-process engine (:class:`baselines.engine.simulation.FederatedSimulation`) and a Flower ``ServerApp``
(:mod:`baselines.flower.server_app`) drive the same calls in the same order, so both sample the
same clients, log the same rows (per client in sampled order: its downlink, then its uplink) and
aggregate the same decoded updates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from baselines.core.client_update import ClientUpdate
from baselines.core.communication_log import CommunicationLog
from baselines.engine.communication import SERVER, Channel
from baselines.strategies import Strategy
from baselines.wire import EncodedMessage

#: Client metrics whose name starts with this are the DP methods' per-client diagnostics
#: (clipping and noise against signal), logged per client in the round's ``privacy`` row.
PRIVACY_DIAGNOSTIC = "dp_"


class FederatedServer:
    """The server of a federation of ``num_clients`` clients.

    Args:
        strategy: samples clients and aggregates their updates.
        channel: encodes, logs and decodes messages.
        num_clients: K.
        seed: the run's seed (sampling derives from it and the round).
    """

    def __init__(
        self, strategy: Strategy, channel: Channel, *, num_clients: int, seed: int
    ) -> None:
        self.strategy = strategy
        self.channel = channel
        self.num_clients = num_clients
        self.seed = seed

    def sample(self, federated_round: int) -> list[int]:
        """The round's clients (sorted ids), as the strategy samples them."""
        return self.strategy.configure_fit(federated_round, self.num_clients, seed=self.seed)

    def broadcast(self, weights: dict[str, torch.Tensor]) -> EncodedMessage:
        """The global weights encoded once for every sampled client."""
        return self.channel.encode(weights)

    def receive(
        self,
        federated_round: int,
        client: int,
        broadcast: EncodedMessage,
        reply: EncodedMessage,
        num_examples: int,
        metrics: dict[str, float],
    ) -> ClientUpdate:
        """Log a client's exchange of the round (downlink, then uplink) and decode its update.

        Args:
            federated_round: 1-based round.
            client: the client id.
            broadcast: what the server sent it.
            reply: what it sent back.
            num_examples: its aggregation weight.
            metrics: its training metrics.

        Returns:
            The decoded update, ready for :meth:`aggregate`.
        """
        self.channel.record(
            broadcast, federated_round=federated_round, sender=SERVER, receiver=client
        )
        delta = self.channel.deliver(
            reply, federated_round=federated_round, sender=client, receiver=SERVER
        )
        return ClientUpdate(delta, num_examples, metrics)

    def lost(self, federated_round: int, client: int, broadcast: EncodedMessage) -> None:
        """Log the downlink of a client that never answered (dropped from the round)."""
        self.channel.record(
            broadcast, federated_round=federated_round, sender=SERVER, receiver=client
        )

    def aggregate(
        self,
        federated_round: int,
        weights: dict[str, torch.Tensor],
        results: Sequence[ClientUpdate],
    ) -> dict[str, torch.Tensor]:
        """The next global weights (the strategy's ``aggregate_fit``)."""
        return self.strategy.aggregate_fit(federated_round, weights, results)

    def round_row(
        self,
        federated_round: int,
        clients: list[int],
        results: Sequence[ClientUpdate],
        log_start: int,
    ) -> dict[str, Any]:
        """The round's metrics row (before evaluation).

        Args:
            federated_round: 1-based round.
            clients: the sampled clients.
            results: their decoded updates.
            log_start: number of log records before the round.
        """
        round_log = CommunicationLog(self.channel.log.records[log_start:])
        row: dict[str, Any] = {
            "round": federated_round,
            "clients": clients,
            "examples": sum(r.num_examples for r in results),
            "round_bytes": round_log.total_bytes(),
            "total_bytes": self.channel.log.total_bytes(),
        }
        losses = [r.metrics["loss"] for r in results if "loss" in r.metrics]
        if losses:
            row["train_loss"] = float(np.mean(losses))
        privacy = [
            {key: value for key, value in r.metrics.items() if key.startswith(PRIVACY_DIAGNOSTIC)}
            for r in results
        ]
        if any(privacy):
            row["privacy"] = privacy
        return row
