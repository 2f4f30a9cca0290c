"""``fp32``: every value as 4 little-endian bytes, the official starter kit's wire."""

from __future__ import annotations

from benchmark.wire_formats.base import CastFormat

FP32 = "fp32"
#: bytes of one value in ``fp32``.
FP32_BYTES_PER_VALUE = 4


class Fp32Format(CastFormat):
    """Full precision: a tensor of n values costs 4 n bytes, and decodes to what was sent."""

    name = FP32
    lossless = True
    cast_dtype = "float32"
    bytes_per_value = FP32_BYTES_PER_VALUE
