"""``nf4`` and ``nf4-B``: 4-bit NormalFloat in blocks, one fp32 absolute maximum per block.

NF4 is the data type of Dettmers et al. 2023, "QLoRA: Efficient Finetuning of Quantized LLMs"
(https://arxiv.org/abs/2305.14314). A tensor of n values is cut into blocks of B values (64 for
``nf4``, a power of two in 128..4096 for ``nf4-B``); each value becomes a 4-bit code, two codes a
byte, and each block sends its scale as a float32: ``ceil(n / 2) + 4 ceil(n / B)`` bytes, 4.5
bits a value for whole blocks of 64. The codec is ``baselines.wire.nf4`` (bitsandbytes).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from benchmark.wire_formats.base import Shapes, WireFormat

NF4 = "nf4"
#: values per block of ``nf4`` (the format name without a block size).
NF4_BLOCK_SIZE = 64
NF4_BLOCK_SIZES = (64, 128, 256, 512, 1024, 2048, 4096)
_NF4_NAME = re.compile(r"nf4(?:-([0-9]{2,4}))?", re.ASCII)


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


@dataclass(frozen=True)
class NF4Format(WireFormat):
    """NF4 with blocks of ``blocksize`` values (lossy: the receiver gets the nearest levels).

    Attributes:
        blocksize: values per block, one of :data:`NF4_BLOCK_SIZES`.

    Raises:
        ValueError: for another block size.
    """

    name = NF4
    blocksize: int = NF4_BLOCK_SIZE

    def __post_init__(self) -> None:
        if self.blocksize not in NF4_BLOCK_SIZES:
            raise ValueError(
                f"NF4 block size must be a power of two in [64, 4096], got {self.blocksize}"
            )

    @classmethod
    def from_name(cls, format_name: str) -> NF4Format | None:
        """``nf4`` (blocks of 64) or ``nf4-B`` (``nf4-64`` is spelled ``nf4``)."""
        match = _NF4_NAME.fullmatch(format_name)
        if match is None or format_name == f"{NF4}-{NF4_BLOCK_SIZE}":
            return None
        blocksize = int(match.group(1)) if match.group(1) else NF4_BLOCK_SIZE
        return cls(blocksize) if blocksize in NF4_BLOCK_SIZES else None

    @classmethod
    def spelling(cls) -> str:
        """``nf4, nf4-B (B in 128, ..., 4096)``."""
        return f"{NF4}, {NF4}-B (B in {', '.join(map(str, NF4_BLOCK_SIZES[1:]))})"

    @property
    def format_name(self) -> str:
        """``nf4`` or ``nf4-B``."""
        return nf4_format_name(self.blocksize)

    def data_bytes(self, shapes: Shapes) -> int:
        """:func:`nf4_data_bytes` of each tensor (see :meth:`WireFormat.data_bytes`)."""
        return sum(nf4_data_bytes(math.prod(shape), self.blocksize) for shape in shapes)
