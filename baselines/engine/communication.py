"""The channel between server and clients: every message encoded, logged and decoded.

Every message is encoded by a wire codec into the bytes that would travel, the receiver gets the
decoded tensors, and the channel records those bytes in the run's
:class:`~baselines.core.communication_log.CommunicationLog` (one
:class:`~baselines.core.communication_log.MessageRecord` a message: its size, wire format,
SHA-256 and per-tensor SHA-256).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import torch

from baselines.core.communication_log import CommunicationLog, MessageRecord
from baselines.wire import EncodedMessage, WireCodec
from benchmark.communication_log import (
    SERVER,
    MessageError,
    check_endpoints,
    official_logger_bytes,
)


def encode_message(codec: WireCodec, tensors: Mapping[str, torch.Tensor]) -> EncodedMessage:
    """Encode tensors with ``codec`` and note what the official logger would have counted.

    Args:
        codec: the wire format.
        tensors: canonical name -> tensor.

    Returns:
        The message as it travels.
    """
    values = {name: tensor.numel() for name, tensor in tensors.items()}
    return dataclasses.replace(
        codec.encode(tensors), official_logger_bytes=official_logger_bytes(values)
    )


class Channel:
    """Carries messages through a wire codec and logs each one.

    Args:
        codec: the wire format of every message, both directions.
        log: where messages are recorded.
    """

    def __init__(self, codec: WireCodec, log: CommunicationLog) -> None:
        self.codec = codec
        self.log = log

    def encode(self, tensors: Mapping[str, torch.Tensor]) -> EncodedMessage:
        """Encode a message once (a broadcast reuses it for every receiver)."""
        return encode_message(self.codec, tensors)

    def record(
        self, message: EncodedMessage, *, federated_round: int, sender: int, receiver: int
    ) -> None:
        """Log an encoded message as sent from ``sender`` to ``receiver``.

        Args:
            message: the encoded message.
            federated_round: 1-based round.
            sender: sender id (``-1`` = server).
            receiver: receiver id (``-1`` = server).

        Raises:
            ValueError: when neither or both ends are the server.
        """
        try:
            check_endpoints(sender, receiver)
        except MessageError as error:
            raise ValueError(f"the channel refuses the message: {error}") from None
        self.log.append(
            MessageRecord(
                federated_round=federated_round,
                sender=sender,
                receiver=receiver,
                amount_of_bytes=message.data_bytes,
                serialized_bytes=message.serialized_bytes,
                format=message.format,
                direction="down" if sender == SERVER else "up",
                sha256=message.sha256,
                parameters=message.names,
                official_logger_bytes=message.official_logger_bytes,
                tensor_sha256=message.tensor_sha256,
            )
        )

    def deliver(
        self, message: EncodedMessage, *, federated_round: int, sender: int, receiver: int
    ) -> dict[str, torch.Tensor]:
        """Log an encoded message (see :meth:`record`) and decode it.

        Returns:
            The tensors as the receiver decodes them.
        """
        self.record(message, federated_round=federated_round, sender=sender, receiver=receiver)
        return self.codec.decode(message)

    def send(
        self,
        tensors: Mapping[str, torch.Tensor],
        *,
        federated_round: int,
        sender: int,
        receiver: int,
    ) -> dict[str, torch.Tensor]:
        """Encode, log and decode one message (see :meth:`deliver`)."""
        return self.deliver(
            self.encode(tensors), federated_round=federated_round, sender=sender, receiver=receiver
        )
