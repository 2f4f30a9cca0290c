"""The wire formats' size formulas, shared by the codecs and the evaluator's binding checks."""

from __future__ import annotations

import pytest
import torch

from baselines.wire import Fp32Codec, NF4Codec
from benchmark.wire_formats import UnknownWireFormat, data_bytes, nf4_data_bytes


def test_wire_sizes_match_the_codecs_formulas() -> None:
    assert data_bytes("fp32", [3, 5]) == 32
    assert data_bytes("nf4", [64, 65]) == nf4_data_bytes(64) + nf4_data_bytes(65) == 36 + 41
    assert data_bytes("nf4-128", [128]) == 64 + 4
    for name in ("nf4-64", "nf4-100", "int8", "NF4"):
        with pytest.raises(UnknownWireFormat, match="has no size formula"):
            data_bytes(name, [1])


@pytest.mark.parametrize("codec", [Fp32Codec(), NF4Codec(), NF4Codec(blocksize=256)],
                         ids=["fp32", "nf4", "nf4-256"])
def test_each_codec_sends_what_its_format_name_needs(codec) -> None:  # type: ignore[no-untyped-def]
    tensors = {"a": torch.randn(3, 70), "b": torch.randn(129)}
    message = codec.encode(tensors)
    assert message.format == codec.name
    assert message.data_bytes == data_bytes(message.format, [210, 129])
