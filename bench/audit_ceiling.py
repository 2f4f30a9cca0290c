"""The power of the one-run audit's two analyses: the largest bound each can give (every guess
right) for a number of canaries, and the f-DP re-reading of audits already recorded.

For M canaries, "perfect" means every guess of every plan right. Two ways of spending the 5%:
the kit's audit (:func:`accountant.audit.guess_plans`: 8 plans, each at 0.05 / 16 for binary
guesses, where both analyses run and the verdict takes the larger, 0.05 / 8 for k-ary ones;
the best taken) and one plan declared alone (all M guessed, at 0.05). The Steinke-Nasr-Jagielski bound
(:func:`accountant.audit.epsilon_lower_bound`) is for binary guesses only; the f-DP bound
(:func:`accountant.audit_fdp.fdp_epsilon_lower_bound`) also takes K candidates per canary
(reconstruction canaries).

With ``--recorded FILE.jsonl`` (rows of ``pflkit audit --json``), each row's recorded
guesses and right guesses (the SNJ analysis's best plan) are read again with the f-DP
analysis at 0.05 / 8: a lower bound of what the kit's audit now reports for that run (its
other plans' counts were not recorded).

The claim's Gaussian reading: for a few declared (sigma, q, T), the mu whose Gaussian curve
passes through the PLD accountant's (epsilon, delta) at delta 1e-5 (the one the audit tests at
the competition's delta), 1e-7 and 1e-9, and the central-limit mu: where the mu grows as delta
shrinks, the accountant's curve is not Gaussian-shaped and lies below the Gaussian read at 1e-5
in its far tail.

Usage: ``python -m bench.audit_ceiling --out docs/results [--recorded FILE.jsonl]``; writes
``OUT/audit_ceiling.png`` (bound against canaries, both analyses) and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from accountant.analysis.pld import compute_epsilon
from accountant.audit import epsilon_lower_bound, guess_plans, plan_level
from accountant.audit_fdp import clt_mu, fdp_epsilon_lower_bound, gdp_mu, mu_lower_bound

ALPHA = 0.05
DELTA = 1e-5
CANARIES = (100, 200, 500, 1000)
#: (label, sigma, q, T) of the claims read as Gaussian curves
CLAIMS = (
    ("competition configuration (q = 2/10 x 50/400)", 1.145, 0.025, 5),
    ("same sampling, sigma 0.637", 0.637, 0.025, 5),
    ("provider-level q 0.2, 10 rounds", 0.72, 0.2, 10),
    ("every provider every round (q = 1), 10 rounds", 2.3, 1.0, 10),
)


def ceilings(m: int, candidates: int = 2) -> dict[str, float | None]:
    """Both analyses' bounds when every guess is right: with the kit's plans, and with one
    plan of M guesses at ``ALPHA`` (SNJ: None for ``candidates`` > 2)."""
    plans = guess_plans(m)
    binary = candidates == 2
    level = plan_level(ALPHA, len(plans), analyses=2 if binary else 1)  # binary: SNJ and f-DP
    sizes = [k_in + k_out for k_in, k_out in plans]
    if candidates > 2:  # no in/out split: the plans' guess counts, both sides' worth
        sizes = [min(m, s) for s in sizes]
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


def _cell(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--recorded", type=Path, default=None)
    args = parser.parse_args()
    rows = [("membership (k = 2)", m, ceilings(m)) for m in CANARIES]
    rows.append(("reconstruction (k = 10)", 100, ceilings(100, candidates=10)))
    print("| canaries | kind | SNJ, 8 plans at 0.05/16 | f-DP, 8 plans (mu*) | SNJ, 1 plan at 0.05 | "
          "f-DP, 1 plan |")  # fmt: skip
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    for kind, m, c in rows:
        print(f"| {m} | {kind} | {_cell(c['snj_plans'])} | {_cell(c['fdp_plans'])} "
              f"({c['fdp_mu_plans']:.3f}) | {_cell(c['snj_one'])} | {_cell(c['fdp_one'])} |")  # fmt: skip
    print("\n| claim | sigma | q | T | PLD epsilon at 1e-5 | mu at 1e-5 | mu at 1e-7 | mu at 1e-9 "
          "| CLT mu |")  # fmt: skip
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for label, sigma, q, steps in CLAIMS:
        mus = []
        for delta in (1e-5, 1e-7, 1e-9):
            eps = compute_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=delta)
            mus.append(gdp_mu(eps, delta=delta))
            if delta == 1e-5:
                eps5 = eps
        clt = clt_mu(noise_multiplier=sigma, sample_rate=q, steps=steps)
        print(f"| {label} | {sigma} | {q} | {steps} | {eps5:.3f} | {mus[0]:.3f} | {mus[1]:.3f} "
              f"| {mus[2]:.3f} | {clt:.3f} |")  # fmt: skip
    cases, larger = 0, 0
    for m in (20, 50, 100, 300):
        for r in sorted({2, 5, m // 10, m // 4, m // 2, m}):
            for v in range(r // 2, r + 1, max(1, r // 12)):
                for delta in (1e-5, 1e-3):
                    snj = epsilon_lower_bound(m, r, v, delta, ALPHA / 8)
                    fdp = fdp_epsilon_lower_bound(m, r, v, delta=delta, alpha=ALPHA / 8)
                    cases, larger = cases + 1, larger + (fdp >= snj - 1e-6)
    print(f"\nf-DP bound >= SNJ bound (at 0.05 / 8) in {larger} of {cases} (m, r, v, delta) cases")
    if args.recorded:
        print("\n| run | claim | guesses right | SNJ (recorded) | f-DP, same counts |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for line in args.recorded.read_text().splitlines():
            row = json.loads(line)
            m = 100 if row.get("canaries") is None else row["canaries"]
            fdp = fdp_epsilon_lower_bound(m, row["guesses"], row["correct"], delta=row["delta"],
                                          alpha=ALPHA / 8)  # fmt: skip
            print(f"| {row['run']} | {row['claimed_epsilon']} | {row['correct']} of "
                  f"{row['guesses']} | {row['audit_epsilon']:.3f} | {fdp:.3f} |")  # fmt: skip
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid = [20, 50, 100, 150, 200, 300, 500, 700, 1000, 1500, 2000]
    curves = {m: ceilings(m) for m in grid}
    figure, axes = plt.subplots(figsize=(6, 4))
    axes.plot(grid, [curves[m]["fdp_plans"] for m in grid], "o-", label="f-DP (Gaussian), 8 plans")
    axes.plot(grid, [curves[m]["snj_plans"] for m in grid], "s-", label="SNJ, 8 plans")
    axes.plot(grid, [curves[m]["fdp_one"] for m in grid], "o:", label="f-DP, one plan at 0.05")
    axes.plot(grid, [curves[m]["snj_one"] for m in grid], "s:", label="SNJ, one plan at 0.05")
    axes.set_xscale("log")
    axes.set_xlabel("canaries (binary, every guess right)")
    axes.set_ylabel(f"largest epsilon lower bound (delta {DELTA:g})")
    axes.set_title("One-run audit: the perfect attack's ceiling")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    args.out.mkdir(parents=True, exist_ok=True)
    figure.savefig(args.out / "audit_ceiling.png", dpi=120)
    print(f"\nwrote {args.out / 'audit_ceiling.png'}")


if __name__ == "__main__":
    main()
