"""The power of the one-run audit's two analyses: the largest bound each can give (every guess
right) for a number of canaries, and the f-DP re-reading of audits already recorded.

For M canaries, "perfect" means every guess of every plan right. Two ways of spending the 5%:
the kit's audit, the best of its plans taken, and one plan declared alone (all M guessed, at
0.05). The kit's plans are those of :mod:`accountant.audit`: for membership canaries the 8
plans of :func:`accountant.audit.guess_plans`, each at 0.05 / 16 (both analyses run and the
verdict takes the larger); for reconstruction canaries (K candidates each) the guess counts of
:func:`accountant.audit.reconstruction_audit`, each at 0.05 / (number of counts), the f-DP
analysis alone. The Steinke-Nasr-Jagielski bound (:func:`accountant.audit.epsilon_lower_bound`)
is for binary guesses only; the f-DP bound (:func:`accountant.audit_fdp.fdp_epsilon_lower_bound`)
also takes K candidates per canary.

With ``--recorded FILE.jsonl`` (rows of ``pflkit audit --json``), each row's recorded
guesses and right guesses (the SNJ analysis's best plan) are read again by both analyses at
the audit's level (0.05 / 16): a lower bound of what the kit's audit now reports for that run
(its other plans' counts were not recorded).

The claim's Gaussian reading: for a few declared (sigma, q, T), the mu whose Gaussian curve
passes through the PLD accountant's (epsilon, delta) at delta 1e-5 (the one the audit tests at
the competition's delta), 1e-7 and 1e-9, and the central-limit mu: where the mu grows as delta
shrinks, the accountant's curve is not Gaussian-shaped and lies below the Gaussian read at 1e-5
in its far tail.

Usage: ``python -m bench.audit_ceiling --out docs/results [--recorded FILE.jsonl]``; writes the
tables' data files (:mod:`experiments.results_file`) ``OUT/data/audit_fdp_ceiling.json``,
``OUT/data/audit_fdp_gaussian.json`` and, with ``--recorded``, ``OUT/data/audit_fdp_recorded.json``
(``docs/results/audit_fdp.md`` renders them), and ``OUT/audit_ceiling.png`` (bound against
canaries, both analyses).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from accountant.analysis.pld import compute_epsilon
from accountant.audit import (
    RECONSTRUCTION_GUESS_FRACTIONS,
    epsilon_lower_bound,
    guess_plans,
    plan_level,
)
from accountant.audit_fdp import clt_mu, fdp_epsilon_lower_bound, gdp_mu, mu_lower_bound
from experiments.results_file import Table, command_line, number, text

ALPHA = 0.05
DELTA = 1e-5
DELTA_TEXT = "1e-5"
CANARIES = (100, 200, 500, 1000)
#: candidates per reconstruction canary in the ceiling table's last row
CANDIDATES = 10
#: (label, sigma, q, T) of the claims read as Gaussian curves
CLAIMS = (
    ("competition configuration (q = 2/10 x 50/400)", 1.145, 0.025, 5),
    ("same sampling, sigma 0.637", 0.637, 0.025, 5),
    ("provider-level q 0.2, 10 rounds", 0.72, 0.2, 10),
    ("every provider every round (q = 1), 10 rounds", 2.3, 1.0, 10),
)
#: the data files, under OUT/data
CEILING, GAUSSIAN, RECORDED = (
    "audit_fdp_ceiling.json",
    "audit_fdp_gaussian.json",
    "audit_fdp_recorded.json",
)


def membership_level(m: int) -> float:
    """The level of each of the audit's membership plans for ``m`` canaries (both analyses)."""
    return plan_level(ALPHA, len(guess_plans(m)), analyses=2)


def level_text(level: float) -> str:
    """A plan's level as the pages write it: ``0.05 / 16``."""
    return f"{ALPHA:g} / {round(ALPHA / level)}"


def reconstruction_counts(m: int) -> list[int]:
    """The guess counts :func:`accountant.audit.reconstruction_audit` tests for ``m`` canaries."""
    return sorted({min(max(1, round(f * m)), m) for f in RECONSTRUCTION_GUESS_FRACTIONS})


def ceilings(m: int, candidates: int = 2) -> dict[str, float | None]:
    """Both analyses' bounds when every guess is right: with the audit's plans (see the module
    docstring), and with one plan of M guesses at ``ALPHA`` (SNJ: None for ``candidates`` > 2)."""
    binary = candidates == 2
    if binary:
        sizes = [k_in + k_out for k_in, k_out in guess_plans(m)]
        level = membership_level(m)
    else:
        sizes = reconstruction_counts(m)
        level = plan_level(ALPHA, len(sizes))
    return {
        "snj_plans": max(epsilon_lower_bound(m, r, r, DELTA, level) for r in sizes) if binary else None,
        "fdp_plans": max(
            fdp_epsilon_lower_bound(m, r, r, delta=DELTA, alpha=level, candidates=candidates)
            for r in sizes
        ),
        "snj_one": epsilon_lower_bound(m, m, m, DELTA, ALPHA) if binary else None,
        "fdp_one": fdp_epsilon_lower_bound(m, m, m, delta=DELTA, alpha=ALPHA, candidates=candidates),
        "fdp_mu_plans": max(mu_lower_bound(m, r, r, alpha=level, candidates=candidates) for r in sizes),
    }  # fmt: skip


def agreement() -> tuple[int, int]:
    """On a grid of (m, r, v, delta): in how many cases the f-DP bound is at least the SNJ one,
    both at the audit's membership level for m canaries; and the number of cases."""
    cases, larger = 0, 0
    for m in (20, 50, 100, 300):
        level = membership_level(m)
        for r in sorted({2, 5, m // 10, m // 4, m // 2, m}):
            for v in range(r // 2, r + 1, max(1, r // 12)):
                for delta in (1e-5, 1e-3):
                    snj = epsilon_lower_bound(m, r, v, delta, level)
                    fdp = fdp_epsilon_lower_bound(m, r, v, delta=delta, alpha=level)
                    cases, larger = cases + 1, larger + (fdp >= snj - 1e-6)
    return larger, cases


def _bound(value: float | None) -> float | str:
    return "n/a" if value is None else round(value, 3)


def ceiling_table() -> Table:
    """The perfect attack's bounds: membership canaries at :data:`CANARIES`, and 100
    reconstruction canaries of :data:`CANDIDATES` candidates."""
    rows: list[dict[str, Any]] = []
    kinds = [("membership (k = 2)", m, 2) for m in CANARIES]
    kinds.append((f"reconstruction (k = {CANDIDATES})", 100, CANDIDATES))
    for kind, m, candidates in kinds:
        c = ceilings(m, candidates)
        rows.append({
            "canaries": m, "kind": kind, "snj_plans": _bound(c["snj_plans"]),
            "fdp_plans": f"{c['fdp_plans']:.3f} ({c['fdp_mu_plans']:.3f})",
            "snj_one": _bound(c["snj_one"]), "fdp_one": _bound(c["fdp_one"]),
        })  # fmt: skip
    membership = level_text(membership_level(100))
    counts = len(reconstruction_counts(100))
    larger, cases = agreement()
    plans = len(guess_plans(100))
    note = (f"Delta {DELTA_TEXT}. The audit's plans: membership, {plans} plans, each at "
            f"{membership} (both analyses); reconstruction, {counts} guess counts, each at "
            f"{level_text(plan_level(ALPHA, counts))} (f-DP alone). On a grid of {cases} (m, r, "
            f"v, delta) cases at the membership level the f-DP bound is at least the SNJ one in "
            f"{larger}.")  # fmt: skip
    columns = (
        number("canaries", "canaries", "int"),
        text("kind", "kind"),
        number("snj_plans", "SNJ, the audit's plans", ".3f"),
        text("fdp_plans", "f-DP, the audit's plans (mu*)", align="right"),
        number("snj_one", f"SNJ, 1 plan at {ALPHA:g}", ".3f"),
        number("fdp_one", "f-DP, 1 plan", ".3f"),
    )
    return Table(columns, rows, note)


def gaussian_table() -> Table:
    """Each claim of :data:`CLAIMS` read as a Gaussian curve at three deltas."""
    rows = []
    for label, sigma, q, steps in CLAIMS:
        row: dict[str, Any] = {"claim": label, "sigma": sigma, "q": q, "t": steps}
        for delta, key in ((1e-5, "mu_1e_5"), (1e-7, "mu_1e_7"), (1e-9, "mu_1e_9")):
            eps = compute_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=delta)
            if delta == 1e-5:
                row["pld_epsilon_1e_5"] = round(eps, 3)
            row[key] = round(gdp_mu(eps, delta=delta), 3)
        row["clt_mu"] = round(clt_mu(noise_multiplier=sigma, sample_rate=q, steps=steps), 3)
        rows.append(row)
    columns = (
        text("claim", "claim"),
        number("sigma", "sigma", ".3f"),
        number("q", "q", ".3f"),
        number("t", "T", "int"),
        number("pld_epsilon_1e_5", "PLD epsilon at 1e-5", ".3f"),
        number("mu_1e_5", "mu at 1e-5", ".3f"),
        number("mu_1e_7", "mu at 1e-7", ".3f"),
        number("mu_1e_9", "mu at 1e-9", ".3f"),
        number("clt_mu", "CLT mu", ".3f"),
    )
    return Table(columns, rows)


def recorded_bounds(
    m: int, guesses: int, correct: int, delta: float = DELTA
) -> tuple[float, float]:
    """The SNJ and f-DP bounds of one plan's counts (``correct`` of ``guesses`` right, ``m``
    membership canaries) at the audit's level for ``m`` canaries."""
    level = membership_level(m)
    return (
        epsilon_lower_bound(m, guesses, correct, delta, level),
        fdp_epsilon_lower_bound(m, guesses, correct, delta=delta, alpha=level),
    )


def recorded_table(path: Path) -> Table:
    """Each recorded audit's best-plan counts read by both analyses at the audit's level."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        m = 100 if row.get("canaries") is None else row["canaries"]
        guesses, correct, delta = row["guesses"], row["correct"], row["delta"]
        snj, fdp = recorded_bounds(m, guesses, correct, delta)
        claim = row["claimed_epsilon"]
        rows.append({
            "run": row["run"], "claim": "none" if claim is None else claim,
            "guesses_right": f"{correct} of {guesses}", "snj": round(snj, 3), "fdp": round(fdp, 3),
        })  # fmt: skip
    level = level_text(membership_level(100))
    columns = (
        text("run", "run"),
        number("claim", "claim", ".1f"),
        text("guesses_right", "guesses right", align="right"),
        number("snj", f"SNJ, same counts at {level}", ".3f"),
        number("fdp", f"f-DP, same counts at {level}", ".3f"),
    )
    note = f"Recorded counts: `{path.name}` (the SNJ analysis's best plan of each run)."
    return Table(columns, rows, note)


def plot(path: Path) -> None:
    """Both analyses' perfect-attack bounds against the number of (membership) canaries."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid = [20, 50, 100, 150, 200, 300, 500, 700, 1000, 1500, 2000]
    curves = {m: ceilings(m) for m in grid}
    level = level_text(membership_level(100))
    figure, axes = plt.subplots(figsize=(6, 4))
    axes.plot(grid, [curves[m]["fdp_plans"] for m in grid], "o-",
              label=f"f-DP (Gaussian), 8 plans at {level}")  # fmt: skip
    axes.plot(grid, [curves[m]["snj_plans"] for m in grid], "s-", label=f"SNJ, 8 plans at {level}")
    axes.plot(grid, [curves[m]["fdp_one"] for m in grid], "o:", label="f-DP, one plan at 0.05")
    axes.plot(grid, [curves[m]["snj_one"] for m in grid], "s:", label="SNJ, one plan at 0.05")
    axes.set_xscale("log")
    axes.set_xlabel("canaries (binary, every guess right)")
    axes.set_ylabel(f"largest epsilon lower bound (delta {DELTA:g})")
    axes.set_title("One-run audit: the perfect attack's ceiling")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> None:
    """Compute the tables, write their data files and the plot."""
    parser = argparse.ArgumentParser(prog="python -m bench.audit_ceiling",
                                     description=__doc__.splitlines()[0])  # fmt: skip
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--recorded", type=Path, default=None)
    args = parser.parse_args(argv)
    command = command_line("bench.audit_ceiling", sys.argv[1:] if argv is None else argv)
    data = args.out / "data"
    print(ceiling_table().write(data / CEILING, command=command))
    print(gaussian_table().write(data / GAUSSIAN, command=command))
    if args.recorded:
        print(recorded_table(args.recorded).write(data / RECORDED, command=command))
    plot(args.out / "audit_ceiling.png")
    print(args.out / "audit_ceiling.png")


if __name__ == "__main__":
    main()
