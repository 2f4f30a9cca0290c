"""Wire formats: how messages are serialised and what their bytes count."""

from __future__ import annotations

from baselines.wire.codec import EncodedMessage, WireCodec
from baselines.wire.fp32 import Fp32Codec
from baselines.wire.nf4 import NF4Codec, nf4_data_bytes

CODECS: dict[str, type[WireCodec]] = {"fp32": Fp32Codec, "nf4": NF4Codec}


def get_codec(name: str) -> WireCodec:
    """Build a wire codec by name.

    Args:
        name: ``fp32`` (no quantisation) or ``nf4``.

    Returns:
        The codec.

    Raises:
        ValueError: for an unknown name.
    """
    if name not in CODECS:
        raise ValueError(f"unknown wire format {name!r}; choose one of {sorted(CODECS)}")
    return CODECS[name]()


__all__ = ["CODECS", "EncodedMessage", "Fp32Codec", "NF4Codec", "WireCodec", "get_codec",
           "nf4_data_bytes"]
