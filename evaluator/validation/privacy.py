"""The track-2 privacy declaration (``privacy.json``): safe loading, verification, cross-check.

The file is read by the kit's one privacy.json reader (``benchmark.privacy_file``: the strict
JSON reader's limits, then the accountant's validation of every key of docs/design.md); this
module turns its refusals into rejections, runs ``accountant.verify`` and cross-checks the declaration
against the communication log actually uploaded (rounds and clients per round), since a claim
about a different run than the one logged proves nothing.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

from benchmark.privacy_file import PRIVACY_FILE, PrivacyFileError, read_privacy_file
from evaluator.federation import Federation
from evaluator.validation.commlog import CommunicationTally
from evaluator.validation.errors import InvalidSubmission
from evaluator.validation.jsonfile import load_json_object

__all__ = ["cross_check", "load_declaration", "load_json_object", "verify_declaration"]

PART = "privacy"


def load_declaration(path: Path, *, max_bytes: int) -> Any:
    """Read and validate a privacy declaration: the kit's one reader
    (``benchmark.privacy_file``) with the accountant's validation.

    Args:
        path: the uploaded ``privacy.json``.
        max_bytes: largest file accepted.

    Returns:
        The accountant's ``PrivacyDeclaration``.

    Raises:
        InvalidSubmission: naming the missing or invalid field, or what is wrong with the file.
    """
    from accountant.declaration import parse_declaration

    try:
        return read_privacy_file(path, validate=parse_declaration, max_bytes=max_bytes,
                                 source=PRIVACY_FILE)  # fmt: skip
    except PrivacyFileError as exc:
        raise InvalidSubmission(PART, str(exc)) from None


# What a "verified" claim means, stored with every report and shown on the leaderboard pages.
VERIFICATION_COVERS = (
    "the accountant (RDP) recomputed epsilon from the declared noise multiplier, sampling and "
    "rounds, with the clients and providers of the benchmark the evaluator holds; the declared "
    "rounds and clients per round match the uploaded communication log; delta is at most 1/N "
    "for the benchmark's N providers; and the checkpoint carries the declared noise: the change "
    "of the tensors the clients sent in full, from the base, has the energy that the declared "
    "noise multiplier, clipping norm, providers and clients per round, rounds and server step "
    "imply (the noise floor, false-alarm rate at most 1e-6 on an honest run)"
)
VERIFICATION_DOES_NOT_COVER = (
    "that the submitted checkpoint was trained by the declared mechanism in every respect: the "
    "evaluator sees the final weights, the log and the declaration, not the training; a run "
    "that adds less noise and declares a proportionally smaller server learning rate has the "
    "declared noise energy, and tensors that travelled only as LoRA factors are not covered"
)
# Poisson client sampling: the log's mean clients per round may exceed the declared expected
# count by this many standard errors before it counts as a disagreement.
POISSON_TOLERANCE_SIGMAS = 3.0


def cross_check(
    declaration: Any, tally: CommunicationTally, *, federation: Federation
) -> list[str]:
    """Disagreements between a declaration, the uploaded log and the benchmark's federation.

    Args:
        declaration: the validated declaration.
        tally: the validated log.
        federation: the facts of the benchmark the evaluator holds.

    Returns:
        Human-readable disagreements (empty when they agree).
    """
    problems = []
    if len(tally.rounds) != declaration.rounds:
        problems.append(
            f"the declaration claims {declaration.rounds} rounds, the log holds {len(tally.rounds)}"
        )
    if declaration.clients != federation.clients:
        problems.append(
            f"the declaration claims {declaration.clients} clients, the benchmark has "
            f"{federation.clients}"
        )
    if federation.min_providers is None:
        problems.append(
            "the benchmark directory lists no providers per client (data_points.json), so the "
            "provider sampling rate and 1/N cannot be checked"
        )
    else:
        if declaration.min_providers != federation.min_providers:
            problems.append(
                f"the declaration claims min_providers {declaration.min_providers}, the "
                f"benchmark's smallest client holds {federation.min_providers} providers"
            )
        if declaration.providers_per_round > federation.min_providers:
            problems.append(
                f"providers_per_round {declaration.providers_per_round} exceeds the "
                f"{federation.min_providers} providers of the benchmark's smallest client"
            )
    if federation.max_delta is not None and declaration.delta > federation.max_delta:
        problems.append(
            f"delta {declaration.delta:g} is above 1/N = {federation.max_delta:.3g} for the "
            f"benchmark's {federation.providers} providers"
        )
    problems.extend(_clients_per_round(declaration, tally, federation.clients))
    return problems


def _clients_per_round(declaration: Any, tally: CommunicationTally, clients: int) -> list[str]:
    """Disagreements between the declared clients per round and the log's."""
    per_round = declaration.clients_per_round
    seen = [len(tally_round.clients) for tally_round in tally.rounds]
    if declaration.sampling == "fixed":
        for tally_round, count in zip(tally.rounds, seen, strict=True):
            if count != per_round:
                return [
                    f"round {tally_round.round}: {count} clients in the log, {per_round} declared"
                ]
        return []
    rate = min(per_round / clients, 1.0)
    mean = sum(seen) / len(seen)
    spread = math.sqrt(clients * rate * (1 - rate) / len(seen))
    if mean > per_round + POISSON_TOLERANCE_SIGMAS * spread:
        return [
            f"the log shows {mean:.2f} clients per round on average, above the declared "
            f"{per_round} expected with Poisson sampling"
        ]
    return []


def verify_declaration(
    declaration: Any, tally: CommunicationTally, *, federation: Federation
) -> tuple[bool, dict[str, Any]]:
    """Verify a privacy claim with the accountant, the benchmark's federation and the log.

    The accountant runs on the declaration with ``clients`` and ``min_providers`` replaced by
    the benchmark's, and ``clients_per_round`` raised to the log's mean when the log shows more,
    so a participant's own figures about the federation never lower epsilon.

    Args:
        declaration: the validated declaration.
        tally: the validated communication log.
        federation: the facts of the benchmark the evaluator holds.

    Returns:
        Whether the claim is verified, and the report stored with the submission (the
        accountant's report under ``accountant``, disagreements under ``log_mismatches``, the
        facts used under ``federation``, what verification means under ``covers`` and
        ``does_not_cover``).
    """
    import accountant

    mismatches = cross_check(declaration, tally, federation=federation)
    seen = [len(tally_round.clients) for tally_round in tally.rounds]
    observed = math.floor(sum(seen) / len(seen) + 0.5)
    facts = dataclasses.replace(
        declaration,
        clients=federation.clients,
        clients_per_round=min(max(declaration.clients_per_round, observed), federation.clients),
        min_providers=max(
            federation.min_providers or declaration.min_providers,
            declaration.providers_per_round,
        ),
    )
    report = accountant.verify(facts)
    verified = bool(report.passed) and not mismatches
    return verified, {
        "verified": verified,
        "accountant": json.loads(json.dumps(report.to_dict(), default=str)),
        "log_mismatches": mismatches,
        "federation": dataclasses.asdict(federation),
        "covers": VERIFICATION_COVERS,
        "does_not_cover": VERIFICATION_DOES_NOT_COVER,
    }
