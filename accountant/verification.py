"""``verify(declaration) -> report``: recompute a privacy claim and decide whether it holds.

The RDP accountant is authoritative: it is the analysis the competition used and an upper
bound that the organisers can reproduce exactly. PRV and PLD (tighter) are reported as
cross-checks and never change the verdict.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from accountant.analysis import rdp as rdp_analysis
from accountant.cross_check import estimate_epsilons
from accountant.declaration import PrivacyDeclaration, parse_declaration
from accountant.federated import federated_sample_rate
from accountant.registry import AUTHORITATIVE
from accountant.report import VerificationReport

CROSS_CHECK_TOLERANCE = 0.02


def verify(
    declaration: PrivacyDeclaration | Mapping, *, accountants: tuple[str, ...] | None = None
) -> VerificationReport:
    """Check a privacy declaration against the accountants.

    Args:
        declaration: a ``PrivacyDeclaration`` or the parsed privacy.json mapping.
        accountants: accountants to run (default: all registered; RDP always runs).

    Returns:
        The report: verdict, every accountant's epsilon, margin and notes.

    Raises:
        DeclarationError: when a mapping is given and a field is missing or invalid.
    """
    if not isinstance(declaration, PrivacyDeclaration):
        declaration = parse_declaration(declaration)
    notes: list[str] = []
    steps = _steps(declaration, notes)
    rates = {
        analysis: federated_sample_rate(
            clients_per_round=declaration.clients_per_round,
            clients=declaration.clients,
            providers_per_round=declaration.providers_per_round,
            min_providers=declaration.min_providers,
            analysis=analysis,
        )
        for analysis in ("competition", "strict")
    }
    rate = rates[declaration.analysis]
    estimates = estimate_epsilons(
        noise_multiplier=declaration.noise_multiplier,
        sample_rate=rate,
        steps=steps,
        delta=declaration.delta,
        accountants=accountants,
    )
    computed = estimates.epsilon[AUTHORITATIVE]
    within_budget = computed is not None and computed <= declaration.epsilon
    covered = declaration.sampling == "poisson"
    rdp_delta = _rdp_delta(declaration, rate, steps)
    strict = _strict(
        declaration, rates["strict"], steps, estimates if declaration.analysis == "strict" else None
    )
    notes.insert(
        0,
        "RDP is the authoritative accountant (the competition's analysis, an upper bound); "
        "PRV and PLD are tighter cross-checks and do not change the verdict",
    )
    _sampling_notes(declaration, rates, strict, within_budget, notes)
    _cross_check_notes(estimates, declaration, notes)
    if declaration.unknown_fields:
        notes.append("ignored unknown fields: " + ", ".join(declaration.unknown_fields))
    passed = within_budget and covered and isinstance(declaration.rounds, int)
    return VerificationReport(
        passed=passed,
        within_budget=within_budget,
        covered=covered,
        analysis=declaration.analysis,
        authoritative=AUTHORITATIVE,
        declared_epsilon=declaration.epsilon,
        declared_delta=declaration.delta,
        sample_rate=rate,
        steps=steps,
        epsilon=dict(estimates.epsilon),
        rdp_order=estimates.rdp_order,
        rdp_delta=rdp_delta,
        margin=None if computed is None else declaration.epsilon - computed,
        strict=strict,
        notes=notes,
        skipped=dict(estimates.skipped),
        seconds=dict(estimates.seconds),
        declaration=declaration.to_dict(),
    )


def _steps(declaration: PrivacyDeclaration, notes: list[str]) -> int:
    """Whole rounds to account; a fractional declaration is rounded up and noted."""
    if isinstance(declaration.rounds, int):
        return declaration.rounds
    steps = math.ceil(declaration.rounds)
    notes.append(
        f"rounds {declaration.rounds!r} is not an integer: a run has whole rounds, so the claim "
        f"is not verified; the figures account {steps} rounds (rounded up, an upper bound)"
    )
    return steps


def _rdp_delta(declaration: PrivacyDeclaration, rate: float, steps: int) -> float:
    """Delta at the declared epsilon by the RDP analysis."""
    rdp = rdp_analysis.compute_rdp(
        noise_multiplier=declaration.noise_multiplier, sample_rate=rate, steps=steps
    )
    return rdp_analysis.get_delta(orders=rdp_analysis.ORDERS, rdp=rdp, epsilon=declaration.epsilon)[
        0
    ]


def _strict(declaration: PrivacyDeclaration, rate: float, steps: int, estimates) -> dict:
    """RDP epsilon and verdict under the strict analysis."""
    if estimates is not None:
        epsilon = estimates.epsilon[AUTHORITATIVE]
    else:
        value, _ = rdp_analysis.compute_epsilon(
            noise_multiplier=declaration.noise_multiplier,
            sample_rate=rate,
            steps=steps,
            delta=declaration.delta,
        )
        epsilon = None if math.isinf(value) else value
    return {
        "sample_rate": rate,
        "epsilon": epsilon,
        "within_budget": epsilon is not None and epsilon <= declaration.epsilon,
    }


def _sampling_notes(declaration, rates, strict, within_budget, notes) -> None:
    """Notes on the sampling scheme and on the declared analysis."""
    if declaration.sampling == "fixed":
        notes.append(
            "sampling 'fixed' declared: fixed-size subsets are not covered by the Poisson "
            "sampled-Gaussian analysis; the figures are what Poisson sampling would give, so "
            "the claim is not verified"
        )
    if declaration.analysis == "competition":
        shown = "inf" if strict["epsilon"] is None else f"{strict['epsilon']:.4f}"
        verdict = "also holds" if strict["within_budget"] else "would not hold"
        notes.append(
            f"analysis 'competition' multiplies the client and provider sampling rates "
            f"(q = {rates['competition']:.6g}); it is weaker than the strict analysis, which "
            f"grants no amplification from client sampling (q = {rates['strict']:.6g}, "
            f"RDP epsilon {shown}): the claim {verdict} under the strict analysis"
        )


def _cross_check_notes(estimates, declaration: PrivacyDeclaration, notes: list[str]) -> None:
    """Notes on skipped cross-checks and on what the tighter accountants say."""
    rdp = estimates.epsilon[AUTHORITATIVE]
    for name, reason in estimates.skipped.items():
        notes.append(f"{name.upper()} cross-check not run: {reason}")
    if rdp is None:
        notes.append("RDP epsilon is infinite at the declared delta: no privacy")
        return
    tighter = {n: v for n, v in estimates.epsilon.items() if n != AUTHORITATIVE and v is not None}
    for name, value in tighter.items():
        if value > rdp + CROSS_CHECK_TOLERANCE:
            notes.append(
                f"{name.upper()} epsilon {value:.4f} exceeds the RDP bound {rdp:.4f}: the "
                "accountants disagree, report this"
            )
    if (
        rdp > declaration.epsilon
        and tighter
        and all(v <= declaration.epsilon for v in tighter.values())
    ):
        shown = ", ".join(f"{n.upper()} {v:.4f}" for n, v in tighter.items())
        notes.append(
            f"the tighter accountants are within budget ({shown}) but the RDP bound is not; "
            "verification uses RDP, so raise the noise multiplier (pflkit dp noise) to pass"
        )
    if estimates.rdp_order is not None and estimates.rdp_order >= rdp_analysis.MAX_ORDER:
        notes.append(
            f"the RDP optimum is at the largest order ({rdp_analysis.MAX_ORDER}); the bound is "
            "valid but could be tighter"
        )
