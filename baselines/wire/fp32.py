"""Full-precision wire format: every value as 4 little-endian bytes in a safetensors file."""

from __future__ import annotations

from collections.abc import Mapping

import torch
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors

from baselines.wire.codec import EncodedMessage, WireCodec
from benchmark.wire_formats import FP32, data_bytes


class Fp32Codec(WireCodec):
    """Sends each tensor in float32; ``data_bytes`` = 4 x number of values."""

    name = FP32

    def encode(self, tensors: Mapping[str, torch.Tensor]) -> EncodedMessage:
        """Serialise tensors as float32 safetensors (see :class:`WireCodec`)."""
        ordered = {
            name: tensor.detach().to(torch.float32).contiguous() for name, tensor in tensors.items()
        }
        payload = save_safetensors(ordered, metadata={"format": self.name})
        size = data_bytes(self.name, (tensor.numel() for tensor in ordered.values()))
        return EncodedMessage(payload, size, tuple(ordered), self.name)

    def decode(self, message: EncodedMessage) -> dict[str, torch.Tensor]:
        """Load the float32 tensors back (see :class:`WireCodec`)."""
        loaded = load_safetensors(message.payload)
        return {name: loaded[name] for name in message.names}
