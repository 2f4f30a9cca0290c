"""The wire-format interface: a format's names, its size formula and what it preserves.

A wire format is the encoding of a federated message on the wire. Its declaration here is the
contract the participants' codecs and the evaluator share: the training engine counts the bytes
it sends with [WireFormat.data_bytes][] and the evaluator checks every message of a detailed
log against the same formula, so the two cannot drift apart. The codec that turns tensors into
bytes is the training side's (``baselines.wire``); a [CastFormat][] needs none of its own.
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9_.-]{0,39}", re.ASCII)
"""How a format name is spelled (the detailed log's ``format`` field)."""

Shapes = Sequence[Sequence[int]]
"""The shapes of the tensors of one message, in order (a flat tensor of n values: ``(n,)``)."""


class UnknownWireFormat(ValueError):
    """A format name without a size formula here."""


class WireFormat(ABC):
    """One wire format, found by its ``name`` (a module of `benchmark.wire_formats`).

    A subclass sets ``name`` and implements [data_bytes][]; a format with parameters spelled
    in its name (``nf4-256``) also overrides [from_name][], [format_name][] and
    [spelling][].

    Attributes:
        name: the format's name in the detailed log and in ``pflkit train --wire`` (for a
            format with parameters, the name of its default: ``nf4``).
        lossless: the receiver decodes exactly the float32 values that were sent, so what a
            client adds to its update (track 2's noise) reaches the server unchanged; the
            evaluator's noise floor accepts uplink messages in lossless formats only.
    """

    name: ClassVar[str] = ""
    lossless: ClassVar[bool] = False

    @classmethod
    def from_name(cls, format_name: str) -> WireFormat | None:
        """The format a name spells, or None when the name is not one of this format's.

        Args:
            format_name: a detailed log's ``format``.

        Returns:
            The format (with its parameters), or None.
        """
        return cls() if format_name == cls.name else None

    @classmethod
    def spelling(cls) -> str:
        """How this format's names are written, for messages (``nf4, nf4-B (B in ...)``)."""
        return cls.name

    @property
    def format_name(self) -> str:
        """This format's name, parameters included (``nf4-256``)."""
        return self.name

    @abstractmethod
    def data_bytes(self, shapes: Shapes) -> int:
        """Bytes of tensor data one message of tensors of these shapes takes in this format.

        Args:
            shapes: the shape of each tensor the message carries (each encoded on its own).

        Returns:
            The bytes of tensor data (headers and names left out): the message's
            ``amount_of_bytes``.
        """


class CastFormat(WireFormat):
    """A format that sends every value as one number of a floating-point type, nothing else.

    The training side derives the codec from ``cast_dtype`` (``baselines.wire.codec.CastCodec``:
    every tensor cast to that type in a safetensors file, cast back to float32 on receipt), so a
    format of this kind is its one file here.

    Attributes:
        cast_dtype: the name of the torch dtype the values travel in (``float16``,
            ``bfloat16``, ``float32``).
        bytes_per_value: the bytes of one value in that type.
    """

    cast_dtype: ClassVar[str] = ""
    bytes_per_value: ClassVar[int] = 0

    def data_bytes(self, shapes: Shapes) -> int:
        """``bytes_per_value`` times the number of values (see [WireFormat.data_bytes][])."""
        return self.bytes_per_value * sum(math.prod(shape) for shape in shapes)
