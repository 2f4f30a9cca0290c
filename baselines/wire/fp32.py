"""Full-precision wire format: every value as 4 little-endian bytes in a safetensors file.

The format is :class:`benchmark.wire_formats.fp32.Fp32Format`, a cast to float32 sent by
:class:`~baselines.wire.codec.CastCodec`; this class gives it its name in ``baselines.wire``.
"""

from __future__ import annotations

from baselines.wire.codec import CastCodec
from benchmark.wire_formats import FP32, Fp32Format


class Fp32Codec(CastCodec):
    """Sends each tensor in float32; ``data_bytes`` = 4 x number of values."""

    name = FP32

    def __init__(self, wire_format: Fp32Format | None = None) -> None:
        super().__init__(wire_format or Fp32Format())
