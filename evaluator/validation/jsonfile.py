"""Small JSON files of an upload (``metadata``, ``privacy``) read with the benchmark's one strict,
bounded reader (``benchmark.strict_json``: size, depth, number length, key count; duplicate keys
and NaN refused); every refusal becomes an :class:`InvalidSubmission` naming the part.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmark import strict_json
from benchmark.strict_json import DEFAULT_LIMITS, JsonLimits
from evaluator.validation.errors import InvalidSubmission


def parse_json_object(
    raw: bytes, *, part: str, limits: JsonLimits = DEFAULT_LIMITS
) -> dict[str, Any]:
    """Parse the bytes of an untrusted JSON object within ``limits``.

    Args:
        raw: the file's bytes (UTF-8, an optional BOM allowed).
        part: upload part named in errors (``metadata``, ``privacy``).
        limits: depth, number length and key count allowed.

    Returns:
        The object.

    Raises:
        InvalidSubmission: not UTF-8 JSON, not an object, nested too deep, a number too long,
            too many keys, a key given twice, or NaN/Infinity.
    """
    try:
        return strict_json.parse_json_object(raw, limits=limits)
    except strict_json.JsonRefused as exc:
        raise InvalidSubmission(part, str(exc)) from None


def load_json_object(
    path: Path, *, part: str, max_bytes: int, limits: JsonLimits = DEFAULT_LIMITS
) -> dict[str, Any]:
    """Read a small JSON object from an untrusted file, within a size limit and ``limits``.

    Args:
        path: the file.
        part: upload part named in errors.
        max_bytes: largest file accepted.
        limits: depth, number length and key count allowed.

    Returns:
        The object.

    Raises:
        InvalidSubmission: as :func:`parse_json_object`, or the file is too large.
    """
    try:
        return strict_json.read_json_object(path, max_bytes=max_bytes, limits=limits)
    except strict_json.JsonRefused as exc:
        raise InvalidSubmission(part, str(exc)) from None
