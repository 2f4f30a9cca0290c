"""Binding the communication logs to the checkpoint: what changed must have travelled.

The CSV log's byte counts rank track 1 and its rounds enter track 2's privacy check, but a byte
tally says nothing about what the messages carried. From the organisers' reference checkpoint
(the base every run starts from) and the submitted one, the worker checks the detailed log
(``communication_log.jsonl``, :mod:`evaluator.validation.commdetails`) and the metadata:

1. **Declared tensors.** Every tensor that differs from the base must have been sent by a
   client, in full or (a linear layer) as a LoRA adapter: a changed tensor that no uplink
   message names is refused.
2. **LoRA rank.** A linear layer that travelled only as an adapter of declared rank r
   (``method_options.rank``, or ``method_options.inner.rank`` for a wrapper such as DP) must
   have changed by a matrix of numerical rank at most r (Hu et al. 2022, "LoRA",
   https://arxiv.org/abs/2106.09685: the merged change is ``(alpha / r) B A``).
3. **Bytes.** Each message must claim at least the bytes its wire format needs for the tensors
   it names (the format's size formula, :meth:`benchmark.wire_formats.base.WireFormat.data_bytes`:
   fp32 4 bytes a value, NF4 the packed size), their shapes taken from the reference checkpoint
   (adapters: r x in and out x r).
4. **Metadata.** The clients, messages, total bytes and wire format the metadata states must be
   those of the logs and the benchmark (the rounds and clients per round are checked with the
   CSV, :func:`evaluator.validation.commlog.parse_log`).

A violation is an :class:`InvalidSubmission` (the submission is ``rejected``) that names the
tensor or message and the numbers. What these checks cannot see is in ``docs/organisers/evaluator.md``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmark.communication_log import SERVER, lora_adapted_module
from benchmark.model.safetensors_header import TensorSpec
from benchmark.wire_formats import UnknownWireFormat, wire_format
from evaluator.validation.commdetails import PART, DetailedMessage
from evaluator.validation.commlog import CommunicationTally
from evaluator.validation.errors import InvalidSubmission

#: the rank test's tolerance, in units of the dtype's epsilon times the Frobenius norms of the
#: base and submitted matrices (merging ``W + s B A`` in floating point perturbs every singular
#: value by at most about eps ||W + s B A||_F).
RANK_TOLERANCE_EPS = 4.0
MAX_NAMED = 5


@dataclass(frozen=True)
class Reference:
    """What the binding needs of the organisers' reference checkpoint.

    Attributes:
        checkpoint: its ``model.safetensors`` (the base every run starts from).
        spec: file name -> (shape, dtype) of every tensor.
        file_names: a module's parameter name -> the file's name for the same tensor
            (aliases of a tied tensor and converted layouts, ``benchmark.model.file_names``).
    """

    checkpoint: Path
    spec: TensorSpec
    file_names: Mapping[str, str]


@dataclass
class BindingReport:
    """What was checked, for the worker's log.

    Attributes:
        messages: messages whose bytes were checked.
        changed: tensors that differ from the base.
        adapted: changed tensors checked against the LoRA rank, and the largest rank found.
        max_rank: the largest numerical rank of an adapted tensor's change.
    """

    messages: int = 0
    changed: list[str] = field(default_factory=list)
    adapted: int = 0
    max_rank: int = 0

    def summary(self) -> dict[str, int]:
        """JSON-ready counts."""
        return {"messages": self.messages, "changed": len(self.changed),
                "adapted": self.adapted, "max_rank": self.max_rank}  # fmt: skip


@dataclass
class _Travelled:
    """The file names of the tensors clients sent: in full, or as LoRA adapters."""

    full: set[str] = field(default_factory=set)
    adapted: set[str] = field(default_factory=set)


def declared_lora_rank(method_options: Any) -> int | None:
    """The LoRA rank the metadata declares (``method_options.rank``, or the inner method's).

    Args:
        method_options: ``submission.json``'s ``method_options`` (``Method.describe()``).

    Returns:
        r, or None when no rank is declared.

    Raises:
        InvalidSubmission: a declared rank that is not a positive integer.
    """
    options = method_options
    while isinstance(options, Mapping):
        if "rank" in options:
            rank = options["rank"]
            if not isinstance(rank, int) or isinstance(rank, bool) or rank < 1:
                raise InvalidSubmission(
                    "metadata", f"method_options rank must be a positive integer, got {rank!r}"
                )
            return rank
        options = options.get("inner")
    return None


def check_metadata(
    metadata: Mapping[str, Any],
    tally: CommunicationTally,
    messages: Sequence[DetailedMessage],
    *,
    clients: int,
) -> None:
    """The clients, messages, bytes and wire format the metadata states agree with the logs.

    Args:
        metadata: the submission's metadata (``submission.json``).
        tally: the CSV log's tally.
        messages: the detailed log.
        clients: K, from the benchmark.

    Raises:
        InvalidSubmission: naming the field and both numbers.
    """
    stated = {
        "clients": (metadata.get("clients"), clients, "the benchmark has"),
        "messages": (metadata.get("messages"), tally.messages, "the log holds"),
        "total_bytes": (metadata.get("total_bytes"), tally.total_bytes, "the log sums to"),
    }
    for key, (value, actual, where) in stated.items():
        if value is not None and value != actual:
            raise InvalidSubmission(
                "metadata", f"{key} is {value!r} but {where} {actual}; upload the metadata, "
                "logs and checkpoint of one run",
            )  # fmt: skip
    wire = metadata.get("wire_format")
    if wire is None:
        return
    for message in messages:
        if message.format != wire:
            raise InvalidSubmission(
                PART, f"{message.describe()} is in {message.format!r} but the metadata "
                f"declares wire_format {wire!r}",
            )  # fmt: skip


def check_message_bytes(
    messages: Sequence[DetailedMessage], reference: Reference, *, rank: int | None
) -> _Travelled:
    """Every message claims at least what its format needs for the tensors it names.

    Args:
        messages: the detailed log.
        reference: the reference checkpoint's spec and names.
        rank: the declared LoRA rank (None: no adapter may travel).

    Returns:
        The tensors the clients sent (file names), in full and as adapters.

    Raises:
        InvalidSubmission: an unknown tensor or format, or too few bytes claimed.
    """
    travelled = _Travelled()
    # (format, names) -> (bytes needed, values): the kit's messages repeat one list of names.
    sizes: dict[tuple[str, tuple[str, ...]], tuple[int, int]] = {}
    collected: set[tuple[str, ...]] = set()
    for message in messages:
        key = (message.format, message.parameters)
        if key not in sizes:
            shapes = [_sent_shape(name, message, reference, rank) for name in message.parameters]
            try:
                needed = wire_format(message.format).data_bytes(shapes)
            except UnknownWireFormat as error:
                raise InvalidSubmission(PART, f"{message.describe()}: {error}") from None
            sizes[key] = (needed, sum(math.prod(shape) for shape in shapes))
        (needed, values), claimed = sizes[key], message.row[3]
        if claimed < needed:
            raise InvalidSubmission(
                PART, f"{message.describe()} claims {claimed:,} bytes, but its "
                f"{len(message.parameters)} tensors ({values:,} values) need at least "
                f"{needed:,} bytes in {message.format}",
            )  # fmt: skip
        if message.row[1] != SERVER and message.parameters not in collected:
            collected.add(message.parameters)
            _collect(message.parameters, reference, travelled)
    return travelled


def check_changes(
    checkpoint: Path, reference: Reference, travelled: _Travelled, *, rank: int | None
) -> BindingReport:
    """Every tensor that differs from the base travelled; adapted ones within the LoRA rank.

    Args:
        checkpoint: the submitted ``model.safetensors`` (already validated against the spec).
        reference: the reference checkpoint.
        travelled: what the clients sent (:func:`check_message_bytes`).
        rank: the declared LoRA rank.

    Returns:
        What was found.

    Raises:
        InvalidSubmission: naming the first tensor that changed without travelling, or whose
            change exceeds the rank, with the numbers.
    """
    from benchmark.model.tensor_file import TensorFile

    report = BindingReport()
    with TensorFile(reference.checkpoint) as base, TensorFile(checkpoint) as submitted:
        for name in reference.spec:
            if not _equal(base.get_tensor(name), submitted.get_tensor(name)):
                report.changed.append(name)
        sent = travelled.full | travelled.adapted
        untravelled = [name for name in report.changed if name not in sent]
        if untravelled:
            name = untravelled[0]
            before, after = base.get_tensor(name), submitted.get_tensor(name)
            more = f" (and {len(untravelled) - 1} more tensors)" if len(untravelled) > 1 else ""
            raise InvalidSubmission(
                "model", f"tensor {name}{more} differs from the base (largest change "
                f"{_largest_change(before, after):.3g}, {after.numel():,} values) but no "
                f"client message carried it or an adapter of it; {_sent(travelled)}",
            )  # fmt: skip
        for name in report.changed:
            if name in travelled.full:
                continue
            found, singular, tolerance = numerical_rank(
                base.get_tensor(name), submitted.get_tensor(name)
            )
            report.adapted += 1
            report.max_rank = max(report.max_rank, found)
            if rank is not None and found > rank:
                raise InvalidSubmission(
                    "model", f"tensor {name} travelled only as a LoRA adapter of rank {rank}, "
                    f"but its change has numerical rank {found} (singular value {rank + 1} is "
                    f"{float(singular[rank]):.3g}, the tolerance {tolerance:.3g})",
                )  # fmt: skip
    return report


def numerical_rank(before: Any, after: Any) -> tuple[int, Any, float]:
    """The numerical rank of a matrix's change.

    Singular values of ``after - before`` (in float64) above ``RANK_TOLERANCE_EPS x eps x
    (||before||_F + ||after||_F)`` count: rounding in the dtype of the checkpoint cannot make
    more of them.

    Args:
        before: the base matrix (torch tensor).
        after: the submitted matrix.

    Returns:
        (rank, the singular values in decreasing order, the tolerance).
    """
    import torch

    eps = torch.finfo(after.dtype).eps
    wide_before, wide_after = before.to(torch.float64), after.to(torch.float64)
    tolerance = (
        RANK_TOLERANCE_EPS
        * eps
        * float(torch.linalg.matrix_norm(wide_before) + torch.linalg.matrix_norm(wide_after))
    )
    singular = torch.linalg.svdvals(wide_after - wide_before)
    return int((singular > tolerance).sum()), singular, tolerance


def _sent_shape(
    name: str, message: DetailedMessage, reference: Reference, rank: int | None
) -> tuple[int, ...]:
    """The shape of one named tensor of a message (an adapter factor: r x in or out x r)."""
    adapter = lora_adapted_module(name)
    if adapter is None:
        return _shape(reference, _file_name(name, reference), name, message)
    module, matrix = adapter
    weight = _file_name(f"{module}.weight", reference)
    if weight not in reference.spec or len(reference.spec[weight][0]) != 2:
        raise InvalidSubmission(
            PART, f"{message.describe()} names {name}, an adapter of {module}, which is not a "
            "linear layer of the reference model",
        )  # fmt: skip
    if rank is None:
        raise InvalidSubmission(
            PART, f"{message.describe()} carries the LoRA adapter {name} but the metadata "
            "declares no LoRA rank (method_options.rank)",
        )  # fmt: skip
    out_features, in_features = reference.spec[weight][0]
    return (rank, in_features) if matrix == "A" else (out_features, rank)


def _shape(
    reference: Reference, file_name: str, name: str, message: DetailedMessage
) -> tuple[int, ...]:
    """The reference shape of a named tensor (refused when the model has no such tensor)."""
    if file_name not in reference.spec:
        raise InvalidSubmission(
            PART, f"{message.describe()} names {name}, which is not a tensor of the reference "
            "model",
        )  # fmt: skip
    return tuple(reference.spec[file_name][0])


def _file_name(name: str, reference: Reference) -> str:
    """The checkpoint's name for a module's parameter name (itself when already a file name)."""
    return reference.file_names.get(name, name)


def _collect(parameters: tuple[str, ...], reference: Reference, travelled: _Travelled) -> None:
    """Add one uplink message's tensors to what travelled."""
    for name in parameters:
        adapter = lora_adapted_module(name)
        if adapter is None:
            travelled.full.add(_file_name(name, reference))
        else:
            travelled.adapted.add(_file_name(f"{adapter[0]}.weight", reference))


def _equal(before: Any, after: Any) -> bool:
    """Whether two tensors hold the same values (bit for bit)."""
    import torch

    return bool(torch.equal(before, after))


def _largest_change(before: Any, after: Any) -> float:
    """max |after - before| in float64."""
    import torch

    return float((after.to(torch.float64) - before.to(torch.float64)).abs().max())


def _sent(travelled: _Travelled) -> str:
    """What the uplink carried, for messages."""
    if not travelled.full and not travelled.adapted:
        return "the log has no client message"
    parts = []
    for label, names in (("in full", travelled.full), ("as adapters", travelled.adapted)):
        if names:
            listed = sorted(names)
            more = f" and {len(listed) - MAX_NAMED} more" if len(listed) > MAX_NAMED else ""
            parts.append(f"{len(listed)} tensors {label} ({', '.join(listed[:MAX_NAMED])}{more})")
    return "the clients sent " + " and ".join(parts)


def bind(
    checkpoint: Path,
    reference: Reference,
    metadata: Mapping[str, Any],
    tally: CommunicationTally,
    messages: Sequence[DetailedMessage],
    *,
    clients: int,
) -> BindingReport:
    """Run every binding check (module docstring) on one submission.

    Args:
        checkpoint: the submitted ``model.safetensors``, validated against the spec.
        reference: the reference checkpoint.
        metadata: the submission's metadata.
        tally: the CSV log's tally.
        messages: the detailed log, matched to the CSV (:func:`read_details`).
        clients: K.

    Returns:
        What was checked.

    Raises:
        InvalidSubmission: the first violation, with the tensor or message and the numbers.
    """
    rank = declared_lora_rank(metadata.get("method_options"))
    travelled = check_message_bytes(messages, reference, rank=rank)
    check_metadata(metadata, tally, messages, clients=clients)
    report = check_changes(checkpoint, reference, travelled, rank=rank)
    report.messages = len(messages)
    return report
