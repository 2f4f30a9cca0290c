"""The exact log of every message a run's channel carried.

The log records the bytes that travelled: ``communication_log.csv`` in the competition's format
(:mod:`benchmark.communication_log`, which the evaluator validates against) and
``communication_log.jsonl`` with, per message, the parameter names, the wire format, the full
serialised size, the SHA-256 of the payload and one SHA-256 per tensor (of the bytes it travelled
as: its fp32 values, or its NF4 codes and scales), so that a re-run of the recipe can say which
tensor of which message first differs (:mod:`evaluator.reproduction`). The channel that writes
it is :class:`baselines.engine.communication.Channel`; the run directory saves and reads it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from benchmark.communication_log import format_rows

#: what each of the CSV's four keys holds in the detailed log
_CSV_ROW = "the CSV row of the same line"


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

    # Each field is a key of a line of communication_log.jsonl; its ``help``, what the key
    # holds, is shown in the files reference (docs/reference/files.md).
    federated_round: int = field(metadata={"help": _CSV_ROW})
    sender: int = field(metadata={"help": _CSV_ROW})
    receiver: int = field(metadata={"help": _CSV_ROW})
    amount_of_bytes: int = field(metadata={"help": _CSV_ROW})
    serialized_bytes: int = field(
        metadata={"help": "the whole serialised payload, headers included"}
    )
    format: str = field(metadata={
        "help": "the message's wire format (`fp32`, `nf4`, `nf4-B`, or another module of "
                "`benchmark/wire_formats/`)"})  # fmt: skip
    direction: str = field(metadata={"help": "`down` (server to client) or `up`"})
    sha256: str = field(metadata={"help": "the SHA-256 of the payload"})
    parameters: tuple[str, ...] = field(metadata={
        "help": "the names of the tensors carried, as in the model (a tied tensor under one "
                "name); a LoRA adapter of the linear layer `M` travels as "
                "`M.lora_A.<adapter>.weight` (r x in) and `M.lora_B.<adapter>.weight` "
                "(out x r)"})  # fmt: skip
    official_logger_bytes: int = field(default=0, metadata={
        "help": "what the official starter kit's logger would have counted for the message "
                "(4 bytes a value, the T5 embedding once per state-dict name): for comparison "
                "with the published tables, never ranked"})  # fmt: skip
    tensor_sha256: tuple[str, ...] = field(default=(), metadata={
        "help": "one SHA-256 per name of `parameters`, of the bytes that tensor travelled "
                "as"})  # fmt: skip

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
