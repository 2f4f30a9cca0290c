"""The communication log (``communication_log.csv``): parsed with limits, validated, tallied.

Format and row rules: :mod:`benchmark.communication_log` (the engine writes with the same
module). Track 1 ranks on the total bytes exchanged in
both directions (PFL-DocVQA competition rules), every round of the log included.

A run with a federated pre-training phase (``submission.json``'s ``pretraining``: rounds P and
clients per round) logs the pre-training rounds first, then the declared fine-tuning rounds (then,
track 3, the personalisation round): the first P rounds of the log must each involve the
declared pre-training clients, the rest must be the declared fine-tuning rounds. The declaration
only says which rounds are which; it never takes a message out of the total. Track 2 refuses it:
pre-training on the clients' documents is outside what a privacy declaration accounts for.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmark.communication_log import HEADER, SERVER, MessageError, check_message
from evaluator.validation.errors import InvalidSubmission

PART = "communication_log"
MAX_LINE_CHARS = 200
# An optional minus and ASCII digits only: int() would also take "²"-free Unicode digits such
# as Arabic-Indic ones, and a cell like "--5" must be refused here, not by int().
INTEGER = re.compile(r"-?[0-9]{1,19}", re.ASCII)


@dataclass
class RoundTally:
    """Bytes of one federated round.

    Attributes:
        round: the round number from the log.
        up: bytes sent by clients to the server.
        down: bytes sent by the server to clients.
        clients: distinct clients that took part.
        messages: rows of the round.
    """

    round: int
    up: int = 0
    down: int = 0
    clients: set[int] = field(default_factory=set)
    messages: int = 0

    def as_dict(self) -> dict[str, int]:
        """JSON-ready view."""
        return {
            "round": self.round,
            "up": self.up,
            "down": self.down,
            "total": self.up + self.down,
            "clients": len(self.clients),
            "messages": self.messages,
        }


@dataclass
class CommunicationTally:
    """Totals of a validated log.

    Attributes:
        rounds: the per-round tallies in log order.
        rows: every message as ``(federated_round, sender, receiver, amount_of_bytes)``, in
            log order (the detailed log is checked against them).
    """

    rounds: list[RoundTally]
    rows: list[tuple[int, int, int, int]] = field(default_factory=list)

    @property
    def bytes_up(self) -> int:
        """Client-to-server bytes."""
        return sum(r.up for r in self.rounds)

    @property
    def bytes_down(self) -> int:
        """Server-to-client bytes."""
        return sum(r.down for r in self.rounds)

    @property
    def total_bytes(self) -> int:
        """Bytes in both directions: the track-1 ranking key."""
        return self.bytes_up + self.bytes_down

    @property
    def messages(self) -> int:
        """Rows of the log."""
        return sum(r.messages for r in self.rounds)

    def per_round(self) -> list[dict[str, int]]:
        """JSON-ready per-round tallies."""
        return [r.as_dict() for r in self.rounds]


def parse_log(
    path: Path,
    *,
    clients: int,
    max_bytes: int,
    max_rows: int,
    clients_per_round: int | None = None,
    rounds: int | None = None,
    sampling: str | None = None,
    max_rounds: int | None = None,
    max_messages_per_round: int | None = None,
    personal_round: int | None = None,
    allow_empty: bool = False,
    pretraining_rounds: int | None = None,
    pretraining_clients_per_round: int | None = None,
) -> CommunicationTally:
    """Read, validate and tally a communication log.

    Args:
        path: the CSV file.
        clients: K, the number of clients of the benchmark (ids 0..K-1).
        max_bytes: largest file accepted.
        max_rows: most messages accepted.
        clients_per_round: when given, each round must involve exactly this many distinct
            clients (at most this many when ``sampling`` is ``"poisson"``).
        rounds: when given, the log must hold exactly this many rounds.
        sampling: ``"fixed"`` or ``"poisson"`` client sampling.
        max_rounds: most federated rounds accepted.
        max_messages_per_round: most messages accepted in one round.
        personal_round: track 3: the round, after the declared ones, in which the final global
            model goes to the clients that personalise it; it must be the log's last round, is
            not counted in ``rounds`` and may involve any number of clients.
        allow_empty: accept a log without messages (track 3's ``local-only``: nothing sent).
        pretraining_rounds: the log's first rounds are this many pre-training rounds, not
            counted in ``rounds`` (their bytes count in the total like any other).
        pretraining_clients_per_round: with ``pretraining_rounds``, the distinct clients each
            pre-training round must involve.

    Returns:
        The tally.

    Raises:
        InvalidSubmission: naming the first offending line and what to fix.
    """
    size = path.stat().st_size
    if size > max_bytes:
        raise InvalidSubmission(PART, f"{size} bytes exceed the limit of {max_bytes}")
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InvalidSubmission(
            PART, "the log is not UTF-8 text; upload the CSV the engine wrote"
        ) from None
    lines = text.splitlines()
    if not lines:
        raise InvalidSubmission(PART, "the log is empty")
    if len(lines) - 1 > max_rows:
        raise InvalidSubmission(PART, f"{len(lines) - 1} rows exceed the limit of {max_rows}")
    header = tuple(cell.strip() for cell in lines[0].split(","))
    if header != HEADER:
        raise InvalidSubmission(
            PART, f"the first line must be {','.join(HEADER)!r}, got {lines[0][:MAX_LINE_CHARS]!r}"
        )
    tallies: list[RoundTally] = []
    rows: list[tuple[int, int, int, int]] = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        if len(line) > MAX_LINE_CHARS:
            raise InvalidSubmission(
                PART, f"line {number} is longer than {MAX_LINE_CHARS} characters"
            )
        row = next(csv.reader(io.StringIO(line)))
        round_, sender, receiver, amount = _row_values(row, number)
        try:
            check_message(round_, sender, receiver, amount, clients=clients)
        except MessageError as error:
            raise InvalidSubmission(PART, f"line {number}: {error}") from None
        if tallies and round_ < tallies[-1].round:
            raise InvalidSubmission(
                PART,
                f"line {number}: round {round_} after round "
                f"{tallies[-1].round}; rounds must be in order",
            )
        if not tallies or round_ != tallies[-1].round:
            if max_rounds is not None and len(tallies) >= max_rounds:
                raise InvalidSubmission(
                    PART, f"line {number}: more than {max_rounds} rounds; the limit is {max_rounds}"
                )
            tallies.append(RoundTally(round=round_))
        tally = tallies[-1]
        rows.append((round_, sender, receiver, amount))
        tally.messages += 1
        if max_messages_per_round is not None and tally.messages > max_messages_per_round:
            raise InvalidSubmission(
                PART,
                f"line {number}: round {round_} holds more than {max_messages_per_round} "
                "messages, the limit per round",
            )
        if sender == SERVER:
            tally.down += amount
            tally.clients.add(receiver)
        else:
            tally.up += amount
            tally.clients.add(sender)
    if not tallies and not allow_empty:
        raise InvalidSubmission(PART, "the log has a header but no messages")
    federated = _without_pretraining_rounds(
        _without_personal_round(tallies, personal_round),
        pretraining_rounds, pretraining_clients_per_round,
    )
    _check_consistency(
        federated, clients_per_round=clients_per_round, rounds=rounds, sampling=sampling
    )
    return CommunicationTally(tallies, rows)


def _without_personal_round(
    tallies: list[RoundTally], personal_round: int | None
) -> list[RoundTally]:
    """The federated rounds: every round but the declared personalisation round, which must be
    the last one of the log."""
    if personal_round is None:
        return tallies
    if not tallies or tallies[-1].round != personal_round:
        last = tallies[-1].round if tallies else "none"
        raise InvalidSubmission(
            PART,
            f"the metadata declares personal.log_round {personal_round} (the final model sent "
            f"to the clients) but the log's last round is {last}",
        )
    return tallies[:-1]


def _without_pretraining_rounds(
    tallies: list[RoundTally], rounds: int | None, clients_per_round: int | None
) -> list[RoundTally]:
    """The fine-tuning rounds: every round after the declared pre-training rounds, which must
    come first and each involve the declared pre-training clients."""
    if not rounds:
        return tallies
    if len(tallies) <= rounds:
        raise InvalidSubmission(
            PART, f"the metadata declares {rounds} pre-training rounds before fine-tuning, but "
            f"the log holds {len(tallies)} rounds in all",
        )  # fmt: skip
    for tally in tallies[:rounds]:
        if clients_per_round is not None and len(tally.clients) != clients_per_round:
            raise InvalidSubmission(
                PART, f"pre-training round {tally.round}: {len(tally.clients)} clients took part "
                f"but {clients_per_round} per pre-training round are declared",
            )  # fmt: skip
    return tallies[rounds:]


def _row_values(row: list[str], number: int) -> tuple[int, int, int, int]:
    """The four integers of one row."""
    if len(row) != 4:
        raise InvalidSubmission(
            PART, f"line {number}: {len(row)} fields, expected 4 ({','.join(HEADER)})"
        )
    values = []
    for name, cell in zip(HEADER, row, strict=True):
        cell = cell.strip()
        if not INTEGER.fullmatch(cell):
            raise InvalidSubmission(
                PART,
                f"line {number}: {name} must be an integer in ASCII digits 0-9 (at most 19), "
                f"got {cell[:30]!r}",
            )
        values.append(int(cell))
    return values[0], values[1], values[2], values[3]


def _check_consistency(
    tallies: list[RoundTally],
    *,
    clients_per_round: int | None,
    rounds: int | None,
    sampling: str | None,
) -> None:
    """Rounds and clients per round must agree with what the submission declares."""
    if rounds is not None and len(tallies) != rounds:
        raise InvalidSubmission(
            PART, f"the log holds {len(tallies)} rounds but the metadata declares {rounds}"
        )
    if clients_per_round is None:
        return
    for tally in tallies:
        seen = len(tally.clients)
        if sampling == "poisson" and seen > clients_per_round:
            raise InvalidSubmission(
                PART,
                f"round {tally.round}: {seen} clients took part, more than "
                f"the declared {clients_per_round} per round",
            )
        if sampling != "poisson" and seen != clients_per_round:
            raise InvalidSubmission(
                PART,
                f"round {tally.round}: {seen} clients took part but "
                f"{clients_per_round} per round are declared",
            )


def declared_shape(metadata: Any, track: Any) -> dict[str, Any]:
    """What a submission's metadata declares about its log, as :func:`parse_log` options.

    Rounds, clients per round and sampling for every track; the pre-training rounds before
    them (``pretraining``), except in track 2; for a track with personalisations (track 3), the
    round that sends the final model for personalisation (``personal.log_round``) and an empty
    log (a run that sends nothing, ``local-only``).

    Args:
        metadata: the validated ``SubmissionMetadata``.
        track: its ``benchmark.tracks.Track``.

    Returns:
        Keyword arguments of :func:`parse_log`.

    Raises:
        InvalidSubmission: a track-2 submission that declares pre-training.
    """
    personal = "personal" in track.parts
    log_round = metadata.personal.log_round if personal and metadata.personal else None
    pretraining = metadata.pretraining
    if pretraining is not None and "privacy" in track.parts:
        raise InvalidSubmission(
            "metadata", "track 2 does not take a pre-training phase: pre-training on the "
            "clients' documents is outside what the privacy declaration accounts for",
        )  # fmt: skip
    return {"clients_per_round": metadata.clients_per_round, "rounds": metadata.rounds,
            "sampling": metadata.sampling, "personal_round": log_round,
            "allow_empty": personal,
            "pretraining_rounds": pretraining.rounds if pretraining else None,
            "pretraining_clients_per_round":
                pretraining.clients_per_round if pretraining else None}  # fmt: skip
