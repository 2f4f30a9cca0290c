"""``privacy.json``, where a track-2 run declares its privacy claim: the kit's one reader and one
writer of the file.

The reader takes the untrusted bytes through the kit's one strict, bounded JSON reader
(``benchmark.strict_json``: size, depth, number length, key count; duplicate keys and NaN
refused) and hands the object to a validator: the accountant's ``parse_declaration``, which the
caller passes, since the benchmark imports nothing else of the kit. Every refusal, of the file
or of a field, is one error type, [PrivacyFileError][], that names the field where there is
one; ``pflkit dp verify`` and the DP baselines (``baselines.privacy.declaration_file``) and the
evaluator's upload and worker (``evaluator.validation.privacy``) word it for their users.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from benchmark.strict_json import JsonRefused, Reason, parse_json_object
from benchmark.submission_contract import PRIVACY_FILE

__all__ = [
    "MAX_PRIVACY_BYTES",
    "PRIVACY_FILE",
    "PrivacyFileError",
    "parse_privacy_bytes",
    "read_privacy_file",
    "write_privacy_file",
]

#: the largest privacy.json read unless the caller says otherwise.
MAX_PRIVACY_BYTES = 64 * 1024

Declaration = TypeVar("Declaration")


class PrivacyFileError(ValueError):
    """A privacy.json refused: the file as a whole, or one of its fields.

    Attributes:
        field: the offending key ("" for problems with the file as a whole).
        detail: what is wrong, without the field.
    """

    def __init__(self, field: str, detail: str) -> None:
        self.field, self.detail = field, detail
        super().__init__(f"{field}: {detail}" if field else detail)


def read_privacy_file(
    path: str | Path,
    *,
    validate: Callable[[dict[str, Any]], Declaration],
    max_bytes: int = MAX_PRIVACY_BYTES,
    source: str | None = None,
) -> Declaration:
    """Read and validate privacy.json from an untrusted file.

    Args:
        path: the file.
        validate: turns the parsed object into a declaration, raising a ``ValueError`` with a
            ``field`` attribute for a bad field (``accountant.declaration.parse_declaration``).
        max_bytes: refuse files larger than this.
        source: the file's name in errors (default: its path; the evaluator names the part,
            never its storage).

    Returns:
        What ``validate`` returns.

    Raises:
        PrivacyFileError: the file is missing, larger than ``max_bytes``, not UTF-8 JSON, beyond
            the strict reader's limits, holds duplicate keys or NaN/Infinity, or a field is
            missing or invalid.
    """
    path = Path(path)
    source = str(path) if source is None else source
    try:
        with path.open("rb") as handle:
            raw = handle.read(max_bytes + 1)
    except OSError as error:
        raise PrivacyFileError("", f"cannot read {source}: {error.strerror or error}") from None
    if len(raw) > max_bytes:
        raise PrivacyFileError(
            "", f"{source} is larger than {max_bytes} bytes (files that exceed the limit of "
            f"{max_bytes} are refused); not a privacy.json",
        )  # fmt: skip
    return parse_privacy_bytes(raw, validate=validate, source=source)


def parse_privacy_bytes(
    raw: bytes,
    *,
    validate: Callable[[dict[str, Any]], Declaration],
    source: str = PRIVACY_FILE,
) -> Declaration:
    """Parse and validate the bytes of a privacy.json (size limits are the caller's).

    Args:
        raw: the file's bytes.
        validate: as :func:`read_privacy_file`.
        source: the file named in errors.

    Returns:
        What ``validate`` returns.

    Raises:
        PrivacyFileError: as :func:`read_privacy_file`.
    """
    try:
        data = parse_json_object(raw)
    except JsonRefused as refusal:
        raise _refusal_error(refusal, source) from None
    try:
        return validate(data)
    except ValueError as error:
        if not hasattr(error, "field"):
            raise
        field, message = str(error.field), str(error)
        detail = message[len(field) + 2:] if field and message.startswith(f"{field}: ") else message
        raise PrivacyFileError(field, detail) from None


def write_privacy_file(path: str | Path, declaration: Mapping[str, Any]) -> Path:
    """Write privacy.json atomically: indented JSON with sorted keys, through a temporary file in
    the same directory and ``os.replace`` (the file is complete or absent).

    Args:
        path: the destination file.
        declaration: the declared fields (``PrivacyDeclaration.to_dict()``).

    Returns:
        The path written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, staging = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(json.dumps(dict(declaration), indent=2, sort_keys=True) + "\n")
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(staging, path)
    except BaseException:
        Path(staging).unlink(missing_ok=True)
        raise
    return path


def _refusal_error(refusal: JsonRefused, source: str) -> PrivacyFileError:
    """The strict reader's refusal in the declaration's words (the field named where one is)."""
    if refusal.reason is Reason.NOT_UTF8:
        return PrivacyFileError("", f"{source} is not UTF-8 text")
    if refusal.reason is Reason.DUPLICATE_KEY:
        return PrivacyFileError(refusal.subject, "appears twice in the file")
    if refusal.reason is Reason.NOT_A_NUMBER:
        return PrivacyFileError("", f"{refusal.subject} is not a valid JSON number")
    if refusal.reason in (Reason.NUMBER_TOO_LONG, Reason.NUMBER_OVERFLOW):
        return PrivacyFileError("", str(refusal))
    if refusal.reason is Reason.NOT_AN_OBJECT:
        return PrivacyFileError("", f"the declaration must be a JSON object; got {refusal.subject}")
    if refusal.reason is Reason.MALFORMED and refusal.subject:
        return PrivacyFileError("", f"{source} is not valid JSON: {refusal.subject}")
    return PrivacyFileError("", f"{source} is not valid JSON: {refusal}")
