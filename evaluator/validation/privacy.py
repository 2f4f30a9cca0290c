"""The track-2 privacy declaration (``privacy.json``): safe loading, verification, cross-check.

The file is parsed within explicit limits (``evaluator.validation.jsonfile``: size, depth, number
length, key count; duplicate keys and NaN refused) and its fields validated by the accountant
(``accountant.declaration``: every key of docs/design.md required); this module turns errors
into rejections, runs ``accountant.verify`` and cross-checks the declaration against the
communication log actually uploaded (rounds and clients per round), since a claim about a
different run than the one logged proves nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evaluator.validation.commlog import CommunicationTally
from evaluator.validation.errors import InvalidSubmission
from evaluator.validation.jsonfile import load_json_object

__all__ = ["cross_check", "load_declaration", "load_json_object", "verify_declaration"]

PART = "privacy"


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
    from accountant.declaration import DeclarationError, parse_declaration

    data = load_json_object(path, part=PART, max_bytes=max_bytes)
    try:
        return parse_declaration(data)
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
