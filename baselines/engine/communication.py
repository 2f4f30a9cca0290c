"""The channel between server and clients and the exact log of every message it carried.

Every message is encoded by a wire codec into the bytes that would travel, the receiver gets the
decoded tensors, and the log records those bytes: ``communication_log.csv`` in the competition's
format (:mod:`benchmark.communication_log`, which the evaluator validates against) and
``communication_log.jsonl`` with, per message, the parameter names, the wire format, the full
serialised size, the SHA-256 of the payload and one SHA-256 per tensor (of the bytes it travelled
as: its fp32 values, or its NF4 codes and scales), so that a re-run of the recipe can say which
tensor of which message first differs (:mod:`evaluator.reproduction`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

import torch

from baselines.wire import EncodedMessage, WireCodec
from benchmark.communication_log import (
    SERVER,
    MessageError,
    check_endpoints,
    format_rows,
    official_logger_bytes,
)


@dataclass(frozen=True)
class MessageRecord:
    """One logged message.

    Attributes:
        federated_round: 1-based round number.
        sender: ``-1`` for the server, else the client id.
        receiver: ``-1`` for the server, else the client id.
        amount_of_bytes: tensor data as sent (the competition's count).
        serialized_bytes: full payload size, headers included.
        format: wire format.
        direction: ``down`` (server to client) or ``up``.
        sha256: SHA-256 of the payload.
        parameters: canonical names of the tensors carried.
        official_logger_bytes: what the official starter kit's logger would have counted
            (tied embedding once per state-dict name, 4 bytes a value); for comparison only.
        tensor_sha256: per name of ``parameters``, the SHA-256 of that tensor's bytes in the
            payload (:attr:`~baselines.wire.EncodedMessage.tensor_sha256`); empty in logs
            written before it existed.
    """

    federated_round: int
    sender: int
    receiver: int
    amount_of_bytes: int
    serialized_bytes: int
    format: str
    direction: str
    sha256: str
    parameters: tuple[str, ...]
    official_logger_bytes: int = 0
    tensor_sha256: tuple[str, ...] = ()

    def to_json(self) -> str:
        """One JSON line."""
        data = asdict(self)
        data["parameters"] = list(self.parameters)
        data["tensor_sha256"] = list(self.tensor_sha256)
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> MessageRecord:
        """Parse one JSON line written by :meth:`to_json`."""
        data = json.loads(line)
        data["parameters"] = tuple(data["parameters"])
        data["tensor_sha256"] = tuple(data.get("tensor_sha256", ()))
        return cls(**data)


class CommunicationLog:
    """Every message of a run, in the order sent."""

    def __init__(self, records: Iterable[MessageRecord] = ()) -> None:
        self.records: list[MessageRecord] = list(records)

    def append(self, record: MessageRecord) -> None:
        """Add one message."""
        self.records.append(record)

    def total_bytes(self) -> int:
        """Sum of ``amount_of_bytes`` over all messages."""
        return sum(record.amount_of_bytes for record in self.records)

    def official_logger_total(self) -> int:
        """Sum of what the official logger would have counted (for the published tables)."""
        return sum(record.official_logger_bytes for record in self.records)

    def bytes_by_direction(self) -> dict[str, int]:
        """Total ``amount_of_bytes`` per direction (``down``, ``up``)."""
        totals = {"down": 0, "up": 0}
        for record in self.records:
            totals[record.direction] += record.amount_of_bytes
        return totals

    def until_round(self, federated_round: int) -> CommunicationLog:
        """The messages of rounds ``<= federated_round``."""
        return CommunicationLog(r for r in self.records if r.federated_round <= federated_round)

    def to_csv(self) -> str:
        """The competition's CSV (header + one row per message)."""
        return format_rows(
            (record.federated_round, record.sender, record.receiver, record.amount_of_bytes)
            for record in self.records
        )

    def to_jsonl(self) -> str:
        """The detailed log, one JSON object per line."""
        return "".join(record.to_json() + "\n" for record in self.records)

    @classmethod
    def from_jsonl(cls, text: str) -> CommunicationLog:
        """Parse a detailed log written by :meth:`to_jsonl`."""
        return cls(MessageRecord.from_json(line) for line in text.splitlines() if line.strip())


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
