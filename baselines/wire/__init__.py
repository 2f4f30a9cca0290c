"""Codecs: how the messages of each wire format are serialised, and the registry that finds them.

A wire format is declared once, in a module of :mod:`benchmark.wire_formats` (its name, its size
formula, whether it is lossless), where the evaluator reads it too. A format that casts values
(:class:`~benchmark.wire_formats.base.CastFormat`: ``fp32``, or a ``float16`` format) is sent by
:class:`~baselines.wire.codec.CastCodec`; any other needs a codec here, a
:class:`~baselines.wire.codec.WireCodec` subclass of the format's ``name`` in a module of this
package (``nf4.py``), found by scanning the package like the methods.
"""

from __future__ import annotations

import inspect

from baselines.options import discover
from baselines.wire.codec import CastCodec, EncodedMessage, WireCodec
from baselines.wire.fp32 import Fp32Codec
from baselines.wire.nf4 import NF4Codec, nf4_data_bytes
from benchmark.wire_formats import (
    WIRE_FORMATS,
    CastFormat,
    UnknownWireFormat,
    WireFormat,
    known_formats,
    wire_format,
)

#: format name -> codec class, every module of this package (a format's codec is one new file).
CODECS: dict[str, type[WireCodec]] = discover(__name__, WireCodec)
for _name, _codec in CODECS.items():
    if _name not in WIRE_FORMATS:
        raise ValueError(
            f"{_codec.__module__}.{_codec.__qualname__} sends wire format {_name!r}, which has no "
            f"size formula in benchmark/wire_formats/ (it knows {known_formats()}); declare the "
            "format there first"
        )


def codec_class(name: str) -> tuple[type[WireCodec], WireFormat]:
    """The codec class that sends a wire format, and the format (nothing is built).

    Args:
        name: a format name of :mod:`benchmark.wire_formats` (``fp32``, ``nf4``, ``nf4-256``).

    Returns:
        (the codec class, the format with its parameters).

    Raises:
        UnknownWireFormat: for a name without a size formula, naming the known formats.
        ValueError: for a format that has a size formula but no codec.
    """
    try:
        found = wire_format(name)
    except UnknownWireFormat:
        raise UnknownWireFormat(
            f"unknown wire format {name[:40]!r}; choose one of {known_formats()}"
        ) from None
    codec = CODECS.get(found.name)
    if codec is not None:
        return codec, found
    if isinstance(found, CastFormat):
        return CastCodec, found
    module = inspect.getmodule(type(found))
    raise ValueError(
        f"wire format {name!r} has a size formula ({module.__name__ if module else '?'}) but no "
        f"codec: add a WireCodec subclass with name = {found.name!r} to baselines/wire/"
    )


def get_codec(name: str) -> WireCodec:
    """Build the codec of a wire format by name.

    Args:
        name: ``fp32`` (no quantisation), ``nf4``, ``nf4-B`` or any other format of
            :mod:`benchmark.wire_formats`.

    Returns:
        The codec.

    Raises:
        ValueError: for an unknown name (:class:`UnknownWireFormat`) or a format without a codec.
    """
    codec, found = codec_class(name)
    return codec.from_format(found)


__all__ = ["CODECS", "CastCodec", "EncodedMessage", "Fp32Codec", "NF4Codec", "WireCodec",
           "codec_class", "get_codec", "nf4_data_bytes"]  # fmt: skip
