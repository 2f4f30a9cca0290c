"""The communication log's format (``communication_log.csv``): part of the benchmark's contract.

One row per message, header ``federated_round,sender,receiver,amount_of_bytes``; the server is
``-1`` and clients are ``0..K-1``; every message goes between the server and one client;
``amount_of_bytes`` is positive (the tensor data as sent). The training engine
(``baselines.core.communication_log``) writes rows with :func:`format_rows` and the evaluator
(``evaluator.validation.commlog``) checks every row it reads with :func:`check_message`, so the
writer and the validator cannot drift apart.

The detailed log (``benchmark.submission_contract.COMMUNICATION_DETAILS``) repeats every row
with what the message carried: one JSON object a line, in the CSV's order, with at least the
keys of :data:`DETAILS_KEYS`. ``parameters`` are the tensors' names in the model (a module's parameter
names, aliases of a tied tensor under one name); a LoRA adapter of the linear layer ``M``
travels as ``M.lora_A.<adapter>.weight`` (r x in) and ``M.lora_B.<adapter>.weight`` (out x r),
peft's names (:func:`lora_adapted_module`). ``format`` is a wire format of
:mod:`benchmark.wire_formats`. The evaluator binds this log to the checkpoint
(``evaluator.validation.binding``).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Mapping

HEADER: tuple[str, ...] = ("federated_round", "sender", "receiver", "amount_of_bytes")
#: what each column of :data:`HEADER` holds, shown in the files reference
#: (docs/reference/files.md).
COLUMNS: dict[str, str] = {
    "federated_round": "the round, 1-based as the engine writes it; with `--fsp-rounds P` the "
    "pre-training rounds are 1..P and fine-tuning round r is P + r; on track 3 the final global "
    "model sent to the clients before they personalise it is round R + 1",
    "sender": "`-1` for the server, else the client id `0..K-1`",
    "receiver": "the same; every message goes between the server and one client",
    "amount_of_bytes": "the tensor data as sent, positive: 4 bytes a value in fp32, "
    "`ceil(n/2) + 4 ceil(n/64)` a tensor of n values in NF4 (each wire format states its "
    "formula: `benchmark/wire_formats/`); tied tensors count once",
}
#: the server's id in ``sender`` and ``receiver``.
SERVER = -1
#: keys every line of the detailed log has (the engine writes more: direction, sha256...).
DETAILS_KEYS: tuple[str, ...] = (*HEADER, "format", "parameters")
_LORA_MATRIX = re.compile(r"(?P<module>.+)\.lora_(?P<matrix>[AB])\.[A-Za-z0-9_-]+\.weight")


def lora_adapted_module(name: str) -> tuple[str, str] | None:
    """The linear layer a LoRA adapter tensor adapts, and which factor it is.

    Args:
        name: a parameter name of the detailed log.

    Returns:
        ``(module, "A" or "B")`` for ``module.lora_A.default.weight`` and the like, else None.
    """
    match = _LORA_MATRIX.fullmatch(name)
    return None if match is None else (match.group("module"), match.group("matrix"))


#: The names under which a VT5 state dict holds its one T5 token embedding (one module).
TOKEN_EMBEDDING_NAMES: tuple[str, ...] = (
    "language_backbone.shared.weight",
    "language_backbone.encoder.embed_tokens.weight",
    "language_backbone.decoder.embed_tokens.weight",
)
#: The output layer: an alias of the embedding in a tied model (the kit's own), a tensor of its
#: own in the public VT5 code (``VT5Config.tie_lm_head``).
LM_HEAD_NAME = "language_backbone.lm_head.weight"
#: Every name the embedding can have when ``lm_head`` is tied to it.
TIED_EMBEDDING_NAMES: tuple[str, ...] = (*TOKEN_EMBEDDING_NAMES, LM_HEAD_NAME)
#: Bytes a value took in the official logger's count (it sent float32 numpy arrays).
OFFICIAL_BYTES_PER_VALUE = 4


def official_logger_bytes(values_per_tensor: Mapping[str, int]) -> int:
    """What the official starter kit's logger would have written for one message.

    Its `log_communication` summed `nbytes` over every state-dict entry it sent, in float32, so
    the T5 embedding counted once per name it has in the state dict (three times: shared,
    encoder and decoder `embed_tokens`; four when a tied `lm_head` is one more alias), and every
    message counted 4 bytes a value whatever its wire format. In the public code `lm_head` is a
    tensor of its own, sent (and counted) once beside them. The kit ranks by the exact count (`amount_of_bytes`); this figure
    only lets participants compare with the published tables (the baseline's "1.12 GB").

    Args:
        values_per_tensor: number of values of each tensor the message carries, by kit name (the
            embedding appears once, as `language_backbone.shared.weight`; an untied `lm_head`
            under its own name).

    Returns:
        The official logger's byte count for the message.
    """
    values = sum(values_per_tensor.values())
    shared = values_per_tensor.get(TIED_EMBEDDING_NAMES[0], 0)
    aliases = [name for name in TIED_EMBEDDING_NAMES[1:] if name not in values_per_tensor]
    return OFFICIAL_BYTES_PER_VALUE * (values + shared * len(aliases))


class MessageError(ValueError):
    """A message that breaks the log's row rules (the text says which rule and the values)."""


def check_endpoints(sender: int, receiver: int) -> None:
    """A message goes between the server (-1) and one client.

    Args:
        sender: sender id.
        receiver: receiver id.

    Raises:
        MessageError: for client-to-client or server-to-server messages.
    """
    if (sender == SERVER) == (receiver == SERVER):
        raise MessageError(
            f"every message goes between the server (-1) and a client, got {sender} -> {receiver}"
        )


def check_message(
    federated_round: int, sender: int, receiver: int, amount_of_bytes: int, *, clients: int
) -> None:
    """Check one row against the format's rules.

    Args:
        federated_round: the round (>= 0).
        sender: sender id (-1 or 0..K-1).
        receiver: receiver id (-1 or 0..K-1).
        amount_of_bytes: bytes of tensor data (> 0).
        clients: K.

    Raises:
        MessageError: naming the first broken rule.
    """
    if federated_round < 0:
        raise MessageError(f"federated_round {federated_round} is negative")
    for name, node in (("sender", sender), ("receiver", receiver)):
        if not SERVER <= node < clients:
            raise MessageError(
                f"{name} {node} is not the server (-1) or a client id in 0..{clients - 1}"
            )
    check_endpoints(sender, receiver)
    if amount_of_bytes <= 0:
        raise MessageError(f"amount_of_bytes must be positive, got {amount_of_bytes}")


def format_rows(rows: Iterable[tuple[int, int, int, int]]) -> str:
    """The CSV text of a log: the header, then one ``round,sender,receiver,bytes`` line a message.

    Args:
        rows: ``(federated_round, sender, receiver, amount_of_bytes)`` per message, in order.

    Returns:
        The file's content (``\\n`` line ends).
    """
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(HEADER)
    writer.writerows(rows)
    return buffer.getvalue()
