"""The wire-format interface: how a dictionary of tensors becomes the bytes of one message."""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass

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

    @property
    def sha256(self) -> str:
        """SHA-256 hex digest of the payload."""
        return hashlib.sha256(self.payload).hexdigest()

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
