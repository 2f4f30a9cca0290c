"""Reading a ``privacy.json`` file: the benchmark's strict reader, then the accountant's checks.

The accountant validates an already-parsed declaration (``accountant.declaration``) and imports
nothing else of the kit, so reading the untrusted file lives here, above both: the bytes go
through the kit's one strict, bounded JSON reader (``benchmark.strict_json``: size, depth, number
length, key count; duplicate keys and NaN refused), whose refusals are worded as
:class:`~accountant.declaration.DeclarationError` for ``pflkit dp verify`` and the DP baselines.
The evaluator reads the same file through ``evaluator.validation.privacy``.
"""

from __future__ import annotations

from pathlib import Path

from accountant.declaration import DeclarationError, PrivacyDeclaration, parse_declaration
from benchmark.strict_json import JsonRefused, Reason, parse_json_object

#: the largest privacy.json read.
MAX_DECLARATION_BYTES = 64 * 1024


def load_declaration(
    path: str | Path, *, max_bytes: int = MAX_DECLARATION_BYTES
) -> PrivacyDeclaration:
    """Read and validate privacy.json from an untrusted file.

    Args:
        path: the file.
        max_bytes: refuse files larger than this.

    Returns:
        The validated declaration.

    Raises:
        DeclarationError: when the file is missing, too large, not UTF-8 JSON, beyond the strict
            reader's limits, holds duplicate keys or NaN/Infinity, or a field is missing or
            invalid.
    """
    path = Path(path)
    try:
        with path.open("rb") as handle:
            raw = handle.read(max_bytes + 1)
    except OSError as error:
        raise DeclarationError("", f"cannot read {path}: {error.strerror or error}") from None
    if len(raw) > max_bytes:
        raise DeclarationError("", f"{path} is larger than {max_bytes} bytes; not a privacy.json")
    return parse_declaration_bytes(raw, source=str(path))


def parse_declaration_bytes(raw: bytes, *, source: str = "privacy.json") -> PrivacyDeclaration:
    """Parse and validate the bytes of a privacy.json (size limits are the caller's).

    Args:
        raw: the file's bytes.
        source: the file named in errors.

    Returns:
        The validated declaration.

    Raises:
        DeclarationError: as :func:`load_declaration`.
    """
    try:
        data = parse_json_object(raw)
    except JsonRefused as refusal:
        raise _declaration_error(refusal, source) from None
    return parse_declaration(data)


def _declaration_error(refusal: JsonRefused, source: str) -> DeclarationError:
    """The strict reader's refusal in the declaration's words (the field named where one is)."""
    if refusal.reason is Reason.NOT_UTF8:
        return DeclarationError("", f"{source} is not UTF-8 text")
    if refusal.reason is Reason.DUPLICATE_KEY:
        return DeclarationError(refusal.subject, "appears twice in the file")
    if refusal.reason is Reason.NOT_A_NUMBER:
        return DeclarationError("", f"{refusal.subject} is not a valid JSON number")
    if refusal.reason is Reason.NOT_AN_OBJECT:
        return DeclarationError("", f"the declaration must be a JSON object; got {refusal.subject}")
    if refusal.reason is Reason.MALFORMED and refusal.subject:
        return DeclarationError("", f"{source} is not valid JSON: {refusal.subject}")
    return DeclarationError("", f"{source} is not valid JSON: {refusal}")
