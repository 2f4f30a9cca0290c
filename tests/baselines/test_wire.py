"""Wire formats: byte counts as the competition defines them, lossless fp32, bounded NF4 error."""

from __future__ import annotations

import hashlib
import math

import pytest
import torch

from baselines.wire import Fp32Codec, NF4Codec, get_codec, nf4_data_bytes

SHAPES = [(1,), (2,), (63,), (64,), (65,), (3, 5), (17, 33), (6, 32), (1000,)]


def _tensors(seed: int = 0) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return {
        f"layer{i}.weight": torch.randn(shape, generator=generator) * (i + 1)
        for i, shape in enumerate(SHAPES)
    }


def test_fp32_counts_four_bytes_per_value_and_round_trips_exactly() -> None:
    tensors = _tensors()
    message = Fp32Codec().encode(tensors)
    assert message.data_bytes == 4 * sum(t.numel() for t in tensors.values())
    assert message.serialized_bytes == len(message.payload) > message.data_bytes
    assert message.sha256 == hashlib.sha256(message.payload).hexdigest()
    decoded = Fp32Codec().decode(message)
    assert list(decoded) == list(tensors)
    for name, tensor in tensors.items():
        assert torch.equal(decoded[name], tensor)


def test_nf4_counts_packed_codes_plus_one_fp32_scale_per_block() -> None:
    tensors = _tensors()
    message = NF4Codec().encode(tensors)
    expected = sum(math.ceil(t.numel() / 2) + 4 * math.ceil(t.numel() / 64) for t in tensors.values())
    assert message.data_bytes == expected
    assert expected == sum(nf4_data_bytes(t.numel()) for t in tensors.values())
    # 4.5 bits per value for whole blocks: 7.1x fewer bytes than fp32
    assert nf4_data_bytes(64 * 1000) * 32 == 4 * 64 * 1000 * 4.5
    assert message.format == "nf4"


def test_nf4_round_trip_error_is_bounded_by_half_the_widest_level_gap() -> None:
    from bitsandbytes.functional import get_4bit_type

    levels = get_4bit_type("nf4", device="cpu").sort().values
    half_gap = float((levels[1:] - levels[:-1]).max()) / 2
    tensors = _tensors(seed=3)
    decoded = NF4Codec().decode(NF4Codec().encode(tensors))
    for name, tensor in tensors.items():
        assert decoded[name].shape == tensor.shape
        assert decoded[name].dtype == torch.float32
        flat = tensor.reshape(-1)
        error = (decoded[name].reshape(-1) - flat).abs()
        padding = -flat.numel() % 64  # each block of 64 values against its own absmax
        absmax = torch.nn.functional.pad(flat.abs(), (0, padding)).reshape(-1, 64).amax(dim=1)
        worst = torch.nn.functional.pad(error, (0, padding)).reshape(-1, 64).amax(dim=1)
        assert bool((worst <= absmax * half_gap * (1 + 1e-3) + 1e-7).all()), name
        relative = float(error.norm() / flat.norm())
        assert relative < 0.15, name


def test_nf4_keeps_zero_tensors_zero() -> None:
    zeros = {"lora_B": torch.zeros(130, 6)}
    decoded = NF4Codec().decode(NF4Codec().encode(zeros))
    assert torch.equal(decoded["lora_B"], zeros["lora_B"])


def test_unknown_wire_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown wire format 'int3'"):
        get_codec("int3")


@pytest.mark.parametrize("codec", [Fp32Codec(), NF4Codec()], ids=["fp32", "nf4"])
def test_the_same_tensors_always_give_the_same_payload(codec) -> None:
    # safetensors writes its metadata keys in hash-map order; NF4 has three of them, so
    # without sorting them the logged SHA-256 of one message changed from call to call
    generator = torch.Generator().manual_seed(3)
    tensors = {"a": torch.randn(70, 3, generator=generator), "b": torch.randn(5, generator=generator)}
    payloads = {codec.encode(tensors).payload for _ in range(30)}
    assert len(payloads) == 1
    message = codec.encode(tensors)
    assert message.serialized_bytes == len(payloads.pop())
    assert codec.decode(message).keys() == tensors.keys()
