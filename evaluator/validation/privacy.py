"""The track-2 privacy declaration (``privacy.json``): safe loading, verification, cross-check.

Parsing and field validation are the accountant's (``accountant.declaration``: size-limited,
duplicate keys and NaN refused, every key of docs/design.md required); this module turns its
errors into rejections, runs ``accountant.verify`` and cross-checks the declaration against the
communication log actually uploaded (rounds and clients per round), since a claim about a
different run than the one logged proves nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evaluator.validation.commlog import CommunicationTally
from evaluator.validation.errors import InvalidSubmission

PART = "privacy"


def load_json_object(path: Path, *, part: str, max_bytes: int) -> dict[str, Any]:
    """Parse a small JSON object from an untrusted file.

    Args:
        path: the file.
        part: upload part named in errors.
        max_bytes: largest file accepted.

    Returns:
        The object.

    Raises:
        InvalidSubmission: too large, not UTF-8 JSON, or not an object.
    """
    size = path.stat().st_size
    if size > max_bytes:
        raise InvalidSubmission(part, f"{size} bytes exceed the limit of {max_bytes}")
    try:
        value = json.loads(path.read_bytes().decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise InvalidSubmission(part, "not valid UTF-8 JSON") from None
    if not isinstance(value, dict):
        raise InvalidSubmission(part, "must be a JSON object")
    return value


def load_declaration(path: Path, *, max_bytes: int) -> Any:
    """Read and validate a privacy declaration with the accountant's parser.

    Args:
        path: the uploaded ``privacy.json``.
        max_bytes: largest file accepted.

    Returns:
        The accountant's ``PrivacyDeclaration``.

    Raises:
        InvalidSubmission: naming the missing or invalid field.
    """
    from accountant.declaration import DeclarationError, parse_declaration_bytes

    size = path.stat().st_size
    if size > max_bytes:
        raise InvalidSubmission(PART, f"{size} bytes exceed the limit of {max_bytes}")
    try:
        return parse_declaration_bytes(path.read_bytes(), source="privacy.json")
    except DeclarationError as exc:
        raise InvalidSubmission(PART, str(exc)) from None


def cross_check(declaration: Any, tally: CommunicationTally, *, clients: int) -> list[str]:
    """Disagreements between a declaration and the uploaded communication log.

    Args:
        declaration: the validated declaration.
        tally: the validated log.
        clients: K of the benchmark.

    Returns:
        Human-readable disagreements (empty when they agree).
    """
    problems = []
    if len(tally.rounds) != declaration.rounds:
        problems.append(
            f"the declaration claims {declaration.rounds} rounds, the log holds {len(tally.rounds)}"
        )
    if declaration.clients != clients:
        problems.append(
            f"the declaration claims {declaration.clients} clients, the benchmark has {clients}"
        )
    per_round = declaration.clients_per_round
    for tally_round in tally.rounds:
        seen = len(tally_round.clients)
        if declaration.sampling == "fixed" and seen != per_round:
            problems.append(
                f"round {tally_round.round}: {seen} clients in the log, {per_round} declared"
            )
            break
    return problems


def verify_declaration(
    declaration: Any, tally: CommunicationTally, *, clients: int
) -> tuple[bool, dict[str, Any]]:
    """Verify a privacy claim with the accountant and against the log.

    Args:
        declaration: the validated declaration.
        tally: the validated communication log.
        clients: K of the benchmark.

    Returns:
        Whether the claim is verified, and the report stored with the submission (the
        accountant's report under ``accountant``, log disagreements under ``log_mismatches``).
    """
    import accountant

    report = accountant.verify(declaration)
    mismatches = cross_check(declaration, tally, clients=clients)
    verified = bool(report.passed) and not mismatches
    return verified, {
        "verified": verified,
        "accountant": json.loads(json.dumps(report.to_dict(), default=str)),
        "log_mismatches": mismatches,
    }
