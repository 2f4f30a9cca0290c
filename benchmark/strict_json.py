"""The one strict, bounded reader of untrusted JSON (uploads, checkpoint configs).

Python's ``json`` module accepts what a hostile file can make expensive or fatal: a 5000-digit
integer (``ValueError`` from the integer conversion limit), 600 levels of nesting (deep
recursion in every later consumer), thousands of keys, duplicate keys (a second ``"epsilon"``
silently replacing the first) and ``NaN``. :func:`parse_json_object` checks all of them and has
a single error path: every refusal is a :class:`JsonRefused` whose message says what is wrong
and whose :class:`Reason` says which check refused it. Callers either pass the message on with
their own prefix (the evaluator names the upload's part, the model loaders the file) or word the
reason themselves (the privacy declaration's reader, ``benchmark.privacy_file``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

# A JSON string (escapes included) or a bracket: what the nesting scan needs to see.
_STRING_OR_BRACKET = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


@dataclass(frozen=True)
class JsonLimits:
    """What a small untrusted JSON file may hold.

    Attributes:
        max_depth: deepest nesting of arrays and objects (the top-level object is depth 1).
        max_number_chars: longest number literal (digits, sign, point and exponent).
        max_keys: most object keys in the whole document.
    """

    max_depth: int = 16
    max_number_chars: int = 32
    max_keys: int = 512


#: the limits of the kit's small JSON files (upload metadata, privacy declarations).
DEFAULT_LIMITS = JsonLimits()


class Reason(StrEnum):
    """Which check refused a JSON file."""

    NOT_UTF8 = "not_utf8"
    MALFORMED = "malformed"
    TOO_LARGE = "too_large"
    TOO_DEEP = "too_deep"
    NUMBER_TOO_LONG = "number_too_long"
    NUMBER_OVERFLOW = "number_overflow"
    TOO_MANY_KEYS = "too_many_keys"
    DUPLICATE_KEY = "duplicate_key"
    NOT_A_NUMBER = "not_a_number"
    NOT_AN_OBJECT = "not_an_object"


#: the reasons that mean the bytes are not JSON at all (as opposed to JSON the limits refuse).
MALFORMED_REASONS = frozenset({Reason.NOT_UTF8, Reason.MALFORMED})


class JsonRefused(ValueError):
    """Untrusted JSON refused, with what is wrong.

    Attributes:
        reason: the check that refused it.
        subject: what the reason is about, for callers that word it themselves: the key given
            twice, the constant (``NaN``, ``Infinity``), the number literal, the type found
            instead of an object, the JSON syntax error; "" when there is nothing to name.
    """

    def __init__(self, message: str, *, reason: Reason, subject: str = "") -> None:
        super().__init__(message)
        self.reason = reason
        self.subject = subject

    @property
    def malformed(self) -> bool:
        """Whether the text is not JSON at all (not UTF-8, unbalanced brackets, a syntax error),
        as opposed to JSON beyond the limits or not an object."""
        return self.reason in MALFORMED_REASONS


class _Refused(Exception):
    """Raised inside the ``json`` hooks; turned into a JsonRefused by the parser."""

    def __init__(self, message: str, *, reason: Reason, subject: str = "") -> None:
        super().__init__(message)
        self.reason = reason
        self.subject = subject


def _nesting_depth(text: str) -> tuple[int, bool]:
    """The deepest bracket nesting of a JSON text (brackets inside strings ignored), and
    whether its brackets balance."""
    depth = deepest = 0
    for match in _STRING_OR_BRACKET.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif token in "]}":
            depth -= 1
            if depth < 0:
                return deepest, False
    return deepest, depth == 0


def parse_json_object(raw: bytes, *, limits: JsonLimits = DEFAULT_LIMITS) -> dict[str, Any]:
    """Parse the bytes of an untrusted JSON object within ``limits``.

    Args:
        raw: the bytes (UTF-8, an optional BOM allowed).
        limits: depth, number length and key count allowed.

    Returns:
        The object.

    Raises:
        JsonRefused: not UTF-8 JSON, not an object, nested too deep, a number too long, too
            many keys, a key given twice, or NaN/Infinity.
    """
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise JsonRefused(
            "not valid UTF-8 JSON: save the file as UTF-8", reason=Reason.NOT_UTF8
        ) from None
    depth, balanced = _nesting_depth(text)
    if not balanced:
        raise JsonRefused(
            "not valid UTF-8 JSON: its brackets do not balance",
            reason=Reason.MALFORMED,
            subject="its brackets do not balance",
        )
    if depth > limits.max_depth:
        raise JsonRefused(
            f"nested {depth} levels deep; at most {limits.max_depth} levels are accepted",
            reason=Reason.TOO_DEEP,
        )
    keys = 0

    def number(literal: str) -> int | float:
        if len(literal) > limits.max_number_chars:
            raise _Refused(
                f"a number of {len(literal)} characters ({literal[:12]}...); numbers may have "
                f"at most {limits.max_number_chars} characters",
                reason=Reason.NUMBER_TOO_LONG,
                subject=literal[:12],
            )
        value = float(literal) if any(c in literal for c in ".eE") else int(literal)
        if isinstance(value, float) and value in (float("inf"), float("-inf")):
            raise _Refused(
                f"the number {literal[:20]} is too large for a float",
                reason=Reason.NUMBER_OVERFLOW,
                subject=literal[:20],
            )
        return value

    def constant(name: str) -> None:
        raise _Refused(
            f"{name} is not a JSON number; write a finite number",
            reason=Reason.NOT_A_NUMBER,
            subject=name,
        )

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal keys
        keys += len(items)
        if keys > limits.max_keys:
            raise _Refused(
                f"more than {limits.max_keys} keys in the file", reason=Reason.TOO_MANY_KEYS
            )
        data: dict[str, Any] = {}
        for key, value in items:
            if key in data:
                raise _Refused(
                    f"key {key[:40]!r} appears twice; give each key once",
                    reason=Reason.DUPLICATE_KEY,
                    subject=key[:40],
                )
            data[key] = value
        return data

    try:
        value = json.loads(
            text,
            parse_int=number,
            parse_float=number,
            parse_constant=constant,
            object_pairs_hook=pairs,
        )
    except _Refused as exc:
        raise JsonRefused(str(exc), reason=exc.reason, subject=exc.subject) from None
    except json.JSONDecodeError as exc:
        raise JsonRefused(
            "not valid UTF-8 JSON", reason=Reason.MALFORMED, subject=str(exc)
        ) from None
    except (ValueError, RecursionError):
        raise JsonRefused("not valid UTF-8 JSON", reason=Reason.MALFORMED) from None
    if not isinstance(value, dict):
        raise JsonRefused(
            "must be a JSON object", reason=Reason.NOT_AN_OBJECT, subject=type(value).__name__
        )
    return value


def read_json_object(
    path: Path, *, max_bytes: int, limits: JsonLimits = DEFAULT_LIMITS
) -> dict[str, Any]:
    """Read a small JSON object from an untrusted file, within a size limit and ``limits``.

    Args:
        path: the file (it must exist).
        max_bytes: largest file accepted.
        limits: depth, number length and key count allowed.

    Returns:
        The object.

    Raises:
        JsonRefused: as :func:`parse_json_object`, or the file is too large.
    """
    size = path.stat().st_size
    if size > max_bytes:
        raise JsonRefused(f"{size} bytes exceed the limit of {max_bytes}", reason=Reason.TOO_LARGE)
    return parse_json_object(path.read_bytes(), limits=limits)
