"""What a message's declared wire format needs on the wire: the size formulas of the contract.

The training engine's codecs (``baselines.wire``) count the bytes they send with these formulas
and the evaluator checks every message of a detailed log against them
(``evaluator.validation.binding``), so the two cannot drift apart. A format is a name of the
detailed log's ``format`` field:

- ``fp32``: every value as 4 bytes.
- ``nf4``: 4-bit NormalFloat (Dettmers et al. 2023, "QLoRA", https://arxiv.org/abs/2305.14314)
  in blocks of 64 values, one fp32 absolute maximum per block, two codes per byte; ``nf4-B``
  is the same with blocks of B values (a power of two in 64..4096).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

FP32 = "fp32"
NF4 = "nf4"
#: bytes of one value in ``fp32``.
FP32_BYTES_PER_VALUE = 4
#: values per block of ``nf4`` (the format name without a block size).
NF4_BLOCK_SIZE = 64
NF4_BLOCK_SIZES = (64, 128, 256, 512, 1024, 2048, 4096)
_NF4_NAME = re.compile(r"nf4(?:-([0-9]{2,4}))?", re.ASCII)


class UnknownWireFormat(ValueError):
    """A format name without a size formula here."""


def nf4_format_name(blocksize: int) -> str:
    """The format name of NF4 with blocks of ``blocksize`` values (``nf4`` for 64).

    Args:
        blocksize: values per block.

    Returns:
        ``nf4`` or ``nf4-B``.
    """
    return NF4 if blocksize == NF4_BLOCK_SIZE else f"{NF4}-{blocksize}"


def nf4_data_bytes(numel: int, blocksize: int = NF4_BLOCK_SIZE) -> int:
    """Bytes of one NF4 tensor on the wire: packed 4-bit codes plus one fp32 scale per block.

    Args:
        numel: number of values in the tensor.
        blocksize: values per quantisation block.

    Returns:
        ``ceil(numel / 2) + 4 * ceil(numel / blocksize)``.
    """
    return math.ceil(numel / 2) + 4 * math.ceil(numel / blocksize)


def known_formats() -> str:
    """The format names this module sizes, for messages."""
    return f"{FP32}, {NF4}, {NF4}-B (B in {', '.join(map(str, NF4_BLOCK_SIZES[1:]))})"


def data_bytes(format_name: str, numels: Iterable[int]) -> int:
    """Bytes of tensor data a message of these tensors takes in a wire format.

    Args:
        format_name: the message's wire format (``fp32``, ``nf4``, ``nf4-B``).
        numels: the number of values of each tensor the message carries.

    Returns:
        The bytes the format needs for them (each tensor encoded on its own).

    Raises:
        UnknownWireFormat: for a name this module has no formula for.
    """
    if format_name == FP32:
        return FP32_BYTES_PER_VALUE * sum(numels)
    match = _NF4_NAME.fullmatch(format_name)
    blocksize = int(match.group(1)) if match and match.group(1) else NF4_BLOCK_SIZE
    if match is None or blocksize not in NF4_BLOCK_SIZES or format_name == f"{NF4}-64":
        raise UnknownWireFormat(
            f"wire format {format_name[:40]!r} has no size formula; the evaluator knows "
            f"{known_formats()}"
        )
    return sum(nf4_data_bytes(numel, blocksize) for numel in numels)
