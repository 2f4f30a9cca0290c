"""API tokens: generated at random, shown once, stored only as a SHA-256 hash.

The tokens carry 256 bits of randomness, so a fast hash is enough: there is nothing to brute
force, and a stolen database does not reveal a usable token.
"""

from __future__ import annotations

import hashlib
import secrets

TOKEN_PREFIX = "pfl_"


def new_token() -> str:
    """A fresh API token (``pfl_`` + 43 url-safe characters)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """The hex SHA-256 digest under which a token is stored and looked up."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def tokens_match(token: str, expected: str) -> bool:
    """Constant-time comparison of a presented token with an expected one."""
    return secrets.compare_digest(token.encode("utf-8"), expected.encode("utf-8"))
