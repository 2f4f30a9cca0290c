"""The detailed communication log (``communication_log.jsonl``): read with limits, matched to
the CSV.

Format: :mod:`benchmark.communication_log` (one JSON object a line, in the CSV's order, with the
CSV's four values, the wire ``format`` and the ``parameters`` the message carried). Only its
syntax and its agreement with the CSV are checked here, at upload and again by the worker; what
the messages carried is bound to the checkpoint by :mod:`evaluator.validation.binding`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmark.communication_log import DETAILS_KEYS, HEADER
from benchmark.strict_json import JsonLimits
from benchmark.wire_formats import NAME_PATTERN, UnknownWireFormat, wire_format
from evaluator.validation.errors import InvalidSubmission
from evaluator.validation.jsonfile import parse_json_object

PART = "communication_details"
#: longest line (one message's names: ~40 KB for full fine-tuning of VT5-base).
MAX_LINE_BYTES = 4 * 1024 * 1024
MAX_NAME_CHARS = 300
#: what the reader requires of each key of ``DETAILS_KEYS``, shown in the files reference
#: (docs/reference/files.md)
CHECKS: dict[str, str] = {
    **{key: "an integer, the CSV row's" for key in HEADER},
    "format": "the name of a wire format of `benchmark/wire_formats/`",
    "parameters": f"a list of names of 1 to {MAX_NAME_CHARS} characters, none twice, at most "
    "twice the `max_tensors` setting",
}
_LIMITS = JsonLimits(max_depth=2, max_number_chars=20, max_keys=32)


@dataclass(frozen=True)
class DetailedMessage:
    """One message of the detailed log.

    Attributes:
        line: its line in the file (1-based).
        row: ``(federated_round, sender, receiver, amount_of_bytes)``, as in the CSV.
        format: its wire format.
        parameters: the names of the tensors it carried.
    """

    line: int
    row: tuple[int, int, int, int]
    format: str
    parameters: tuple[str, ...]

    def describe(self) -> str:
        """``round 3, client 1 -> server`` for messages."""
        round_, sender, receiver, _ = self.row
        ends = [("server" if node < 0 else f"client {node}") for node in (sender, receiver)]
        return f"line {self.line} (round {round_}, {ends[0]} -> {ends[1]})"


def read_details(
    path: Path,
    rows: Sequence[tuple[int, int, int, int]],
    *,
    max_bytes: int,
    max_parameters: int,
) -> list[DetailedMessage]:
    """Read the detailed log and check that it repeats the CSV's messages one for one.

    Args:
        path: the ``.jsonl`` file.
        rows: the CSV's messages in order (``CommunicationTally.rows``).
        max_bytes: largest file accepted.
        max_parameters: most tensor names one message may list.

    Returns:
        The messages, in order (identical name lists share one tuple).

    Raises:
        InvalidSubmission: naming the line and what is wrong.
    """
    size = path.stat().st_size
    if size > max_bytes:
        raise InvalidSubmission(PART, f"{size} bytes exceed the limit of {max_bytes}")
    messages: list[DetailedMessage] = []
    shared: dict[tuple[str, ...], tuple[str, ...]] = {}
    with path.open("rb") as stream:
        for number, raw in enumerate(stream, start=1):
            if len(raw) > MAX_LINE_BYTES:
                raise InvalidSubmission(
                    PART, f"line {number} is longer than {MAX_LINE_BYTES} bytes"
                )
            if not raw.strip():
                continue
            if len(messages) >= len(rows):
                raise InvalidSubmission(
                    PART, f"line {number}: more messages than the {len(rows)} rows of the CSV log"
                )
            message = _message(raw, number, max_parameters)
            expected = rows[len(messages)]
            if message.row != expected:
                raise InvalidSubmission(
                    PART,
                    f"line {number} is {_row_text(message.row)} but row {len(messages) + 1} of "
                    f"the CSV log is {_row_text(expected)}; upload the two logs of one run",
                )
            messages.append(
                DetailedMessage(number, message.row, message.format,
                                shared.setdefault(message.parameters, message.parameters))
            )  # fmt: skip
    if len(messages) != len(rows):
        raise InvalidSubmission(
            PART, f"{len(messages)} message(s), but the CSV log has {len(rows)}; upload the two "
            "logs of one run",
        )  # fmt: skip
    return messages


def _message(raw: bytes, number: int, max_parameters: int) -> DetailedMessage:
    """One line's message, its keys and values checked."""
    try:
        data = parse_json_object(raw, part=PART, limits=_LIMITS)
    except InvalidSubmission as error:
        raise InvalidSubmission(PART, f"line {number}: {error.message}") from None
    missing = [key for key in DETAILS_KEYS if key not in data]
    if missing:
        raise InvalidSubmission(PART, f"line {number}: missing key(s) {', '.join(missing)}")
    values = []
    for key in HEADER:
        value = data[key]
        if not isinstance(value, int) or isinstance(value, bool):
            raise InvalidSubmission(PART, f"line {number}: {key} must be an integer")
        values.append(value)
    wire = data["format"]
    if not isinstance(wire, str) or not NAME_PATTERN.fullmatch(wire):
        raise InvalidSubmission(
            PART, f"line {number}: format must be a wire-format name such as fp32 or nf4"
        )
    try:
        wire_format(wire)  # an unknown format is refused at upload, not only by the worker
    except UnknownWireFormat as error:
        raise InvalidSubmission(PART, f"line {number}: {error}") from None
    names = data["parameters"]
    if not isinstance(names, list) or len(names) > max_parameters:
        raise InvalidSubmission(
            PART, f"line {number}: parameters must be a list of at most {max_parameters} names"
        )
    if not all(isinstance(n, str) and 0 < len(n) <= MAX_NAME_CHARS for n in names):
        raise InvalidSubmission(
            PART, f"line {number}: every parameter must be a name of 1 to {MAX_NAME_CHARS} "
            "characters",
        )  # fmt: skip
    if len(set(names)) != len(names):
        raise InvalidSubmission(PART, f"line {number}: a parameter is listed twice")
    row = (values[0], values[1], values[2], values[3])
    return DetailedMessage(number, row, wire, tuple(names))


def _row_text(row: tuple[int, int, int, int]) -> str:
    """``round,sender,receiver,bytes`` of a row."""
    return ",".join(map(str, row))
