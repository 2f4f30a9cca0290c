"""The wire-format interface: how a dictionary of tensors becomes the bytes of one message."""

from __future__ import annotations

import hashlib
import json
import struct
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

import torch


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
    """Serialises tensors for the wire and back; training and aggregation never see the codes."""

    name: str = ""

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
