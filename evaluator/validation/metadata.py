"""The ``metadata`` part of an upload (``submission.json``): one strict parse, one answer.

The upload stream needs the track before it accepts a track-dependent part (``personal_{k}``),
and the upload-time checks need the whole object. Both read the part through
:func:`parse_metadata`, the strict parser of :mod:`evaluator.validation.jsonfile` (a duplicate
key, NaN or a 5000-digit number is refused), and :func:`metadata_track`, so a file whose keys
say two things (``{"track": 1, ..., "track": 3}``) is refused as soon as the part ends, before
a byte of a personalisation is written, and a boolean is never taken for a track number.
"""

from __future__ import annotations

from typing import Any

from benchmark.tracks import TRACKS
from evaluator.validation.errors import InvalidSubmission
from evaluator.validation.jsonfile import parse_json_object

PART = "metadata"


def parse_metadata(raw: bytes, *, max_bytes: int) -> dict[str, Any]:
    """Parse the bytes of an uploaded ``submission.json`` with the strict JSON parser.

    Args:
        raw: the part's bytes.
        max_bytes: the largest metadata part accepted.

    Returns:
        The JSON object, its ``track`` checked by :func:`metadata_track`.

    Raises:
        InvalidSubmission: too large, not a strict JSON object (duplicate keys included), or a
            ``track`` that is not one of the competition's track numbers.
    """
    if len(raw) > max_bytes:
        raise InvalidSubmission(PART, f"{len(raw)} bytes exceed the limit of {max_bytes}")
    data = parse_json_object(raw, part=PART)
    metadata_track(data)
    return data


def metadata_track(data: dict[str, Any]) -> int:
    """The track a parsed metadata object names.

    Args:
        data: the parsed ``submission.json``.

    Returns:
        The track number.

    Raises:
        InvalidSubmission: ``track`` missing, not an integer (``true`` is not track 1, ``"1"``
            is not either) or not a track of the competition.
    """
    numbers = ", ".join(map(str, sorted(TRACKS)))
    if "track" not in data:
        raise InvalidSubmission(PART, f"track: missing; give the track number ({numbers})")
    track = data["track"]
    if not isinstance(track, int) or isinstance(track, bool) or track not in TRACKS:
        raise InvalidSubmission(
            PART, f"track: {str(track)[:20]!r} is not a track number; write one of {numbers} "
            "as a JSON integer",
        )  # fmt: skip
    return track
