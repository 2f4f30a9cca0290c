"""Reading a ``privacy.json`` file for ``pflkit dp verify`` and the DP baselines: the kit's one
reader (``benchmark.privacy_file``) with the accountant's validation, its refusals worded as
:class:`~accountant.declaration.DeclarationError`.

The evaluator reads the same file with the same reader through ``evaluator.validation.privacy``
(its refusals are rejections of the upload).
"""

from __future__ import annotations

from pathlib import Path

from accountant.declaration import DeclarationError, PrivacyDeclaration, parse_declaration
from benchmark.privacy_file import (
    MAX_PRIVACY_BYTES,
    PrivacyFileError,
    parse_privacy_bytes,
    read_privacy_file,
)

#: the largest privacy.json read.
MAX_DECLARATION_BYTES = MAX_PRIVACY_BYTES


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
        DeclarationError: as ``benchmark.privacy_file.read_privacy_file`` refuses.
    """
    try:
        return read_privacy_file(path, validate=parse_declaration, max_bytes=max_bytes)
    except PrivacyFileError as error:
        raise DeclarationError(error.field, error.detail) from None


def parse_declaration_bytes(raw: bytes, *, source: str = "privacy.json") -> PrivacyDeclaration:
    """Parse and validate the bytes of a privacy.json (size limits are the caller's).

    Raises:
        DeclarationError: as :func:`load_declaration`.
    """
    try:
        return parse_privacy_bytes(raw, validate=parse_declaration, source=source)
    except PrivacyFileError as error:
        raise DeclarationError(error.field, error.detail) from None
