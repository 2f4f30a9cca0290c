"""The verification report: JSON-serialisable data and its plain-text rendering."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

ACCOUNTANT_TITLES = {
    "rdp": "RDP (Mironov 2019 + Balle 2020)",
    "prv": "PRV (Gopi 2021, opacus)",
    "pld": "PLD (dp-accounting)",
}


@dataclass
class VerificationReport:
    """Outcome of checking one privacy declaration.

    Attributes:
        passed: the claim holds: RDP epsilon <= declared epsilon under the declared analysis,
            Poisson sampling, whole rounds.
        within_budget: the RDP epsilon alone is within the declared epsilon.
        covered: the declared mechanism is one the Poisson sampled-Gaussian analysis covers.
        analysis: the declared analysis ("competition" or "strict").
        authoritative: the accountant that decides ("rdp"); the others are cross-checks.
        declared_epsilon, declared_delta: the claim.
        sample_rate: provider sampling rate under the declared analysis.
        steps: rounds accounted (rounded up when the declaration's was not whole).
        epsilon: computed epsilon at the declared delta, per accountant (None: not run).
        rdp_order: Renyi order attaining the RDP epsilon.
        rdp_delta: delta the RDP analysis gives at the declared epsilon.
        margin: declared epsilon minus RDP epsilon (negative: over budget).
        strict: the strict analysis' rate, RDP epsilon and verdict (also when declared).
        notes: what a reader must know (sampling scheme, analysis, rounding, skipped checks).
        skipped: reason per cross-check accountant that was not run.
        seconds: time per accountant.
        declaration: the declaration as read.
    """

    passed: bool
    within_budget: bool
    covered: bool
    analysis: str
    authoritative: str
    declared_epsilon: float
    declared_delta: float
    sample_rate: float
    steps: int
    epsilon: dict[str, float | None]
    rdp_order: float | None
    rdp_delta: float
    margin: float | None
    strict: dict
    notes: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    declaration: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """Plain dict of JSON types only (no NaN or infinity)."""
        return asdict(self)

    def to_json(self, **kwargs) -> str:
        """Strict JSON text of ``to_dict()``."""
        return json.dumps(self.to_dict(), allow_nan=False, **kwargs)

    @property
    def verdict(self) -> str:
        """One word: PASS or FAIL."""
        return "PASS" if self.passed else "FAIL"

    def summary(self) -> str:
        """One line: verdict, claim, authoritative epsilon and margin."""
        computed = self.epsilon.get(self.authoritative)
        shown = "inf" if computed is None else f"{computed:.4f}"
        margin = "-inf" if self.margin is None else f"{self.margin:+.4f}"
        return (
            f"{self.verdict}: declared epsilon {self.declared_epsilon:g} at delta "
            f"{self.declared_delta:g}; {self.authoritative.upper()} epsilon {shown} under the "
            f"{self.analysis} analysis (q = {self.sample_rate:.6g}, {self.steps} rounds); "
            f"margin {margin}"
        )

    def epsilon_rows(self) -> list[tuple[str, str, str]]:
        """(accountant, epsilon, role) rows, authoritative first."""
        rows = []
        for name, value in self.epsilon.items():
            role = "authoritative" if name == self.authoritative else "cross-check"
            if value is None:
                shown = "not run: " + self.skipped.get(name, "infinite")
            else:
                shown = f"{value:.4f}"
            rows.append((ACCOUNTANT_TITLES.get(name, name), shown, role))
        return rows

    def to_text(self) -> str:
        """Human-readable multi-line rendering."""
        lines = [self.summary(), ""]
        lines.append("epsilon at the declared delta:")
        width = max(len(title) for title, _, _ in self.epsilon_rows())
        for title, shown, role in self.epsilon_rows():
            lines.append(f"  {title:<{width}}  {shown:<10}  ({role})")
        if self.rdp_order is not None:
            lines.append(f"  RDP optimal order: {self.rdp_order:g}")
        lines.append(
            f"  RDP delta at the declared epsilon: {self.rdp_delta:.3g} "
            f"(declared {self.declared_delta:g})"
        )
        strict_eps = self.strict.get("epsilon")
        strict_shown = "inf" if strict_eps is None else f"{strict_eps:.4f}"
        lines.append(
            f"strict analysis: q = {self.strict['sample_rate']:.6g}, RDP epsilon {strict_shown} "
            f"({'within' if self.strict['within_budget'] else 'over'} budget)"
        )
        if self.notes:
            lines.append("notes:")
            lines.extend(f"  - {note}" for note in self.notes)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()
