"""The codec interface: how a dictionary of tensors becomes the bytes of one message.

A codec sends the messages of one wire format of :mod:`benchmark.wire_formats`, whose ``name``
it shares: the format declares the size formula the evaluator checks, the codec the encoding.
A format that only casts values (:class:`~benchmark.wire_formats.base.CastFormat`) is sent by
:class:`CastCodec` and needs no codec of its own.
"""

from __future__ import annotations

import hashlib
import json
import struct
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

import torch
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors

from benchmark.wire_formats import CastFormat, WireFormat


@dataclass(frozen=True)
class EncodedMessage:
    """One message as it travels.

    Attributes:
        payload: the serialised bytes (a safetensors file).
        data_bytes: bytes of tensor data as sent, the competition's ``amount_of_bytes``.
        names: canonical names of the tensors the message carries, in order.
        format: wire-format name (``fp32``, ``nf4``).
        official_logger_bytes: what the official starter kit's logger would have counted for
            the same tensors (:func:`benchmark.communication_log.official_logger_bytes`).
    """

    payload: bytes
    data_bytes: int
    names: tuple[str, ...]
    format: str
    official_logger_bytes: int = 0

    @cached_property
    def sha256(self) -> str:
        """SHA-256 hex digest of the payload (computed once: a broadcast is logged once per
        receiver)."""
        return hashlib.sha256(self.payload).hexdigest()

    @cached_property
    def tensor_sha256(self) -> tuple[str, ...]:
        """Per name of :attr:`names`, the SHA-256 of the bytes the payload holds for it: its
        own entry's, or those of its entries ``name.<part>`` in sorted order (NF4 stores
        ``name.codes`` and ``name.absmax``)."""
        (header_size,) = struct.unpack("<Q", self.payload[:8])
        header = json.loads(self.payload[8 : 8 + header_size])
        start = 8 + header_size
        entries: dict[str, list[str]] = {}
        for key in sorted(k for k in header if k != "__metadata__"):
            entries.setdefault(key if key in self.names else key.rsplit(".", 1)[0], []).append(key)
        digests = []
        for name in self.names:
            digest = hashlib.sha256()
            for key in entries.get(name, ()):
                begin, end = header[key]["data_offsets"]
                digest.update(self.payload[start + begin : start + end])
            digests.append(digest.hexdigest())
        return tuple(digests)

    @property
    def serialized_bytes(self) -> int:
        """Full size of the payload, headers included."""
        return len(self.payload)


class WireCodec(ABC):
    """Serialises tensors for the wire and back; training and aggregation never see the codes.

    A subclass in a module of :mod:`baselines.wire` whose class sets ``name`` is found by that
    name, the name of the :class:`~benchmark.wire_formats.base.WireFormat` it sends; an
    instance's ``name`` is the format's name with its parameters (``nf4-256``), which every
    message it encodes carries.
    """

    name: str = ""

    @classmethod
    def from_format(cls, wire_format: WireFormat) -> WireCodec:
        """The codec of one format (with its parameters: NF4's block size).

        Args:
            wire_format: the format to send.

        Returns:
            The codec (this default takes no parameters).
        """
        return cls()

    @abstractmethod
    def encode(self, tensors: Mapping[str, torch.Tensor]) -> EncodedMessage:
        """Serialise tensors into one message.

        Args:
            tensors: canonical name -> float tensor.

        Returns:
            The encoded message.
        """

    @abstractmethod
    def decode(self, message: EncodedMessage) -> dict[str, torch.Tensor]:
        """Turn a message back into float32 tensors, as the receiver sees them.

        Args:
            message: a message produced by :meth:`encode`.

        Returns:
            Canonical name -> float32 tensor.
        """


class CastCodec(WireCodec):
    """Sends each tensor cast to a :class:`~benchmark.wire_formats.base.CastFormat`'s dtype in
    a safetensors file, and casts it back to float32 on receipt.

    ``data_bytes`` is the format's formula, ``bytes_per_value`` x number of values.

    Args:
        wire_format: the format.

    Raises:
        ValueError: a format that is no cast, or whose ``cast_dtype`` is not the name of a
            floating-point torch dtype.
    """

    def __init__(self, wire_format: WireFormat) -> None:
        if not isinstance(wire_format, CastFormat):
            raise ValueError(
                f"wire format {wire_format.format_name!r} is not a CastFormat: it needs a codec "
                f"of its own, a WireCodec named {wire_format.name!r} in baselines/wire/"
            )
        dtype = getattr(torch, wire_format.cast_dtype, None) if wire_format.cast_dtype else None
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise ValueError(
                f"wire format {wire_format.format_name!r}: cast_dtype "
                f"{wire_format.cast_dtype!r} is not the name of a floating-point torch dtype "
                "(float16, bfloat16, float32)"
            )
        self.wire_format = wire_format
        self.dtype = dtype
        self.name = wire_format.format_name

    @classmethod
    def from_format(cls, wire_format: WireFormat) -> WireCodec:
        """The codec of ``wire_format`` (see :meth:`WireCodec.from_format`)."""
        return cls(wire_format)

    def encode(self, tensors: Mapping[str, torch.Tensor]) -> EncodedMessage:
        """Cast and serialise tensors (see :class:`WireCodec`)."""
        ordered = {name: tensor.detach().to(self.dtype).contiguous()
                   for name, tensor in tensors.items()}  # fmt: skip
        payload = save_safetensors(ordered, metadata={"format": self.name})
        size = self.wire_format.data_bytes([tuple(tensor.shape) for tensor in ordered.values()])
        return EncodedMessage(payload, size, tuple(ordered), self.name)

    def decode(self, message: EncodedMessage) -> dict[str, torch.Tensor]:
        """Load the tensors back as float32 (see :class:`WireCodec`)."""
        loaded = load_safetensors(message.payload)
        return {name: loaded[name].to(torch.float32) for name in message.names}
