"""Wire formats, one a module, and the size formulas of the contract they declare.

Every module of this package is scanned for :class:`~benchmark.wire_formats.base.WireFormat`
subclasses (:func:`benchmark.discovery.discover`), so a new format is one new file here: its
name, its size formula and whether it is lossless. The training engine's codecs
(``baselines.wire``) count the bytes they send with these formulas and the evaluator checks every
message of a detailed log against them (``evaluator.validation.binding``), so the two cannot
drift apart. A format is a name of the detailed log's ``format`` field:

- ``fp32``: every value as 4 bytes (:mod:`benchmark.wire_formats.fp32`).
- ``nf4``: 4-bit NormalFloat (Dettmers et al. 2023, "QLoRA", https://arxiv.org/abs/2305.14314)
  in blocks of 64 values, one fp32 absolute maximum per block, two codes per byte; ``nf4-B``
  is the same with blocks of B values (a power of two in 64..4096;
  :mod:`benchmark.wire_formats.nf4`).

This package imports neither torch nor anything else heavy: the evaluator's upload checks use it.
"""

from __future__ import annotations

from collections.abc import Iterable

from benchmark.discovery import discover
from benchmark.wire_formats.base import (
    NAME_PATTERN,
    CastFormat,
    Shapes,
    UnknownWireFormat,
    WireFormat,
)
from benchmark.wire_formats.fp32 import FP32, FP32_BYTES_PER_VALUE, Fp32Format
from benchmark.wire_formats.nf4 import (
    NF4,
    NF4_BLOCK_SIZE,
    NF4_BLOCK_SIZES,
    NF4Format,
    nf4_data_bytes,
    nf4_format_name,
)


def discover_formats(package: str = __name__) -> dict[str, type[WireFormat]]:
    """The wire formats of a package's modules, by name, their names checked.

    Args:
        package: the package to scan (this one).

    Returns:
        Name -> format class, sorted by name.

    Raises:
        ValueError: a name a log could not hold (:data:`NAME_PATTERN`), or two formats of one
            name.
    """
    found = discover(package, WireFormat)
    for name, cls in found.items():
        if not NAME_PATTERN.fullmatch(name):
            raise ValueError(
                f"{cls.__module__}.{cls.__qualname__}: wire format name {name!r} must be 1 to 40 "
                "lower-case letters, digits, '_', '.' or '-', starting with a letter or digit"
            )
    return found


#: name -> format class, every module of this package (a new format is one new file).
WIRE_FORMATS: dict[str, type[WireFormat]] = discover_formats()

__all__ = [
    "FP32", "FP32_BYTES_PER_VALUE", "NAME_PATTERN", "NF4", "NF4_BLOCK_SIZE", "NF4_BLOCK_SIZES",
    "WIRE_FORMATS", "CastFormat", "Fp32Format", "NF4Format", "Shapes", "UnknownWireFormat",
    "WireFormat", "data_bytes", "discover_formats", "known_formats", "nf4_data_bytes",
    "nf4_format_name", "wire_format",
]  # fmt: skip


def known_formats() -> str:
    """The format names this package sizes, for messages (``fp32, nf4, nf4-B (B in ...)``)."""
    return ", ".join(cls.spelling() for cls in WIRE_FORMATS.values())


def wire_format(format_name: str) -> WireFormat:
    """The format a name spells, with its parameters.

    Args:
        format_name: a detailed log's ``format`` (``fp32``, ``nf4``, ``nf4-256``).

    Returns:
        The format.

    Raises:
        UnknownWireFormat: for a name no format of this package spells, naming those it knows.
    """
    for cls in WIRE_FORMATS.values():
        found = cls.from_name(format_name)
        if found is not None:
            return found
    raise UnknownWireFormat(
        f"wire format {format_name[:40]!r} has no size formula; the evaluator knows "
        f"{known_formats()}"
    )


def data_bytes(format_name: str, numels: Iterable[int]) -> int:
    """Bytes of tensor data a message of flat tensors takes in a wire format.

    Args:
        format_name: the message's wire format (``fp32``, ``nf4``, ``nf4-B``).
        numels: the number of values of each tensor the message carries.

    Returns:
        The bytes the format needs for them (each tensor encoded on its own).

    Raises:
        UnknownWireFormat: for a name this package has no formula for.
    """
    return wire_format(format_name).data_bytes([(numel,) for numel in numels])
