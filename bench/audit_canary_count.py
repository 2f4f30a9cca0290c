"""How many canaries the audit needs, read from measured scores.

The power study (:mod:`bench.audit_power`) audits each run with the benchmark's 100 canaries.
Here every kept run of one label (``fedavg``: the preset's non-private training) is scored per
canary with the evaluator's attack (:meth:`evaluator.canary_audit.CanaryAudit.scores`, the
organisers' own data, kept under OUT only), the (score, coin) pairs of all its seeds are pooled,
and audits of M canaries are simulated: each canary's coin drawn fair, its score drawn from the
pooled scores of that coin. For every M: both analyses' bounds (median and 10th to 90th
percentile over the draws) and how often the verdict contradicts the false claim (the same
seeds' ``dp-lora`` epsilon-1 declaration, tested at its mechanism's PLD epsilon).

This assumes a canary's signal does not depend on how many canaries there are; more canaries
are more of the training data, so the figures for M far from 100 are an extrapolation.

Usage: ``python -m bench.audit_canary_count --study .bench/audit-power-membership --out DIR
[--label fedavg] [--draws 200] [--kept-only] [--record PATH]``; writes ``OUT/canary_scores.jsonl``
(kept between runs), ``OUT/audit_canary_count.png`` and prints a markdown table; ``--record PATH``
writes the table as that data file (``docs/results/data/audit_power_canaries.json``,
:func:`table_columns`: one row per number of canaries).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from accountant.audit import one_run_audit
from bench.audit_ceiling import DELTA, ceilings
from bench.audit_power import LIAR_DECLARATION, read_ledger
from experiments.results_file import Column, command_line, number, text, write_results_table

CANARY_COUNTS = (50, 100, 200, 400)


def canary_scores(study: Path, out: Path, label: str, *, score_missing: bool = True) -> list[dict]:
    """Per seed of ``study`` with a kept ``label`` run: its canaries' scores and coins
    (computed once, kept in ``OUT/canary_scores.jsonl``; with ``score_missing`` False, only
    those already kept)."""
    from benchmark.model import load_model
    from benchmark.model.loading import resolve_checkpoint
    from evaluator.canary_audit import CanaryAudit

    cache = out / "canary_scores.jsonl"
    kept = read_ledger(cache)
    reference = resolve_checkpoint("base")
    for run in sorted((study / "runs").glob(f"*-s*/{label}/checkpoint")):
        seed = int(run.parent.parent.name.rsplit("-s", 1)[1])
        if (seed, label) in kept or not score_missing:
            continue
        data = study / "data" / run.parent.parent.name
        auditor = CanaryAudit(data, reference)
        scores = auditor.scores(load_model(run).eval())[auditor.attack]
        row = {"seed": seed, "label": label, "attack": auditor.attack, "scores": scores,
               "coins": auditor.coins}  # fmt: skip
        kept[(seed, label)] = row
        with cache.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")
        print(f"scored seed {seed}", flush=True)
    return [row for key, row in sorted(kept.items()) if key[1] == label]


def false_claim(study: Path) -> float:
    """The median tested epsilon of the study's ``dp-lora`` epsilon-1 declarations (each run's
    latest row)."""
    rows = read_ledger(study / "audit_power.jsonl").values()
    tested = sorted(r["tested_epsilon"] for r in rows
                    if r["label"] == LIAR_DECLARATION and r.get("tested_epsilon"))  # fmt: skip
    if not tested:
        raise SystemExit(f"no {LIAR_DECLARATION} run with a tested epsilon in {study}")
    return tested[len(tested) // 2]


def simulate(pooled: list[dict], counts: tuple[int, ...], draws: int, claim: float) -> list[dict]:
    """For each M: both bounds' quantiles over ``draws`` simulated audits and the share that
    contradicts ``claim``."""
    scores = np.concatenate([row["scores"] for row in pooled])
    coins = np.concatenate([row["coins"] for row in pooled]).astype(bool)
    ins, outs = scores[coins], scores[~coins]
    rng = np.random.default_rng(0)
    results = []
    for m in counts:
        snj, fdp, verdict = [], [], []
        for _ in range(draws):
            drawn = rng.random(m) < 0.5
            values = np.where(drawn, rng.choice(ins, m), rng.choice(outs, m))
            audit = one_run_audit(values, drawn, delta=DELTA)
            snj.append(audit.epsilon_lower_bound)
            fdp.append(audit.fdp_epsilon_lower_bound)
            verdict.append(audit.verdict_epsilon)
        ceiling = ceilings(m)["fdp_plans"]
        results.append({
            "canaries": m, "snj": np.quantile(snj, (0.1, 0.5, 0.9)).tolist(),
            "fdp": np.quantile(fdp, (0.1, 0.5, 0.9)).tolist(),
            "contradicted": float(np.mean(np.asarray(verdict) > claim)), "fdp_ceiling": ceiling,
        })  # fmt: skip
    return results


def table_columns(claim: float) -> tuple[Column, ...]:
    """The results table's columns (``docs/results/data/audit_power_canaries.json``) for the
    false claim ``claim`` (its tested epsilon, in the contradiction column's label)."""
    claim_text = f"{claim:.3f}"
    return (
        number("canaries", "canaries", "int"),
        text("f_dp_bound_median_10_to_90", "f-DP bound: median (10% to 90%)"),
        text("snj_bound_median_10_to_90", "SNJ bound: median (10% to 90%)"),
        text(f"verdict_contradicts_the_false_claim_{claim_text.replace('.', '_')}",
             f"verdict contradicts the false claim ({claim_text})", align="right"),
        number("f_dp_every_guess_right", "f-DP, every guess right", ".3f"),
    )


def _quantiles_text(low: float, middle: float, high: float) -> str:
    return f"{middle:.3f} ({low:.3f} to {high:.3f})"


def table_rows(results: list[dict], claim: float) -> list[dict[str, Any]]:
    """The results table's rows of :func:`simulate`'s results, one per number of canaries."""
    keys = [column.key for column in table_columns(claim)]
    return [dict(zip(keys, (r["canaries"], _quantiles_text(*r["fdp"]), _quantiles_text(*r["snj"]),
                            f"{r['contradicted']:.0%}", round(r["fdp_ceiling"], 3)), strict=True))
            for r in results]  # fmt: skip


def plot(results: list[dict], claim: float, path: Path) -> None:
    """Both analyses' bounds (median, 10th to 90th percentile) against the number of canaries,
    with the f-DP perfect-attack ceiling and the false claim."""
    from benchmark.figures import new_figure, save_figure

    figure, axes = new_figure()
    counts = [r["canaries"] for r in results]
    for key, name in (("fdp", "f-DP (Gaussian curves)"), ("snj", "Steinke-Nasr-Jagielski")):
        low, middle, high = zip(*(r[key] for r in results), strict=True)
        axes.plot(counts, middle, marker="o", label=f"{name}: median")
        axes.fill_between(counts, low, high, alpha=0.2)
    axes.plot(counts, [r["fdp_ceiling"] for r in results], linestyle=":", color="grey",
              label="f-DP, every guess right")  # fmt: skip
    axes.axhline(claim, linestyle="--", color="black", label=f"false claim tested ({claim:.3f})")
    axes.set_xscale("log")
    axes.minorticks_off()
    axes.set_xticks(counts, [str(c) for c in counts])
    axes.set_xlabel("canaries")
    axes.set_ylabel("audit's lower bound on epsilon")
    axes.legend()
    save_figure(figure, path)


def main(argv: list[str] | None = None) -> None:
    """Score, simulate, print the table and write the plot."""
    parser = argparse.ArgumentParser(prog="python -m bench.audit_canary_count",
                                     description=__doc__.split("\n\n")[0])  # fmt: skip
    parser.add_argument("--study", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--label", default="fedavg")
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--kept-only", action="store_true",
                        help="simulate from the runs already scored in OUT, score no more")  # fmt: skip
    parser.add_argument("--record", type=Path, default=None,
                        help="write the table as this results table's data file "
                             "(docs/results/data/NAME.json, shown by a results page)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    pooled = canary_scores(args.study, args.out, args.label, score_missing=not args.kept_only)
    if not pooled:
        raise SystemExit(f"no {args.label} run with a checkpoint under {args.study / 'runs'}")
    claim = false_claim(args.study)
    results = simulate(pooled, CANARY_COUNTS, args.draws, claim)
    print(f"{len(pooled)} runs of `{args.label}` pooled ({sum(len(r['coins']) for r in pooled)} "
          f"canaries); false claim tested: {claim:.3f}; {args.draws} draws per count\n")  # fmt: skip
    print("| canaries | f-DP bound: median (10% to 90%) | SNJ bound: median (10% to 90%) | "
          "verdict contradicts the false claim | f-DP, every guess right |")  # fmt: skip
    print("| ---: | --- | --- | ---: | ---: |")
    for r in results:
        print(f"| {r['canaries']} | {r['fdp'][1]:.3f} ({r['fdp'][0]:.3f} to {r['fdp'][2]:.3f}) | "
              f"{r['snj'][1]:.3f} ({r['snj'][0]:.3f} to {r['snj'][2]:.3f}) | "
              f"{r['contradicted']:.0%} | {r['fdp_ceiling']:.3f} |")  # fmt: skip
    plot(results, claim, args.out / "audit_canary_count.png")
    if args.record is not None:
        command = command_line("bench.audit_canary_count", sys.argv[1:] if argv is None else argv)
        print(write_results_table(args.record, table_columns(claim), table_rows(results, claim),
                                  command=command))  # fmt: skip


if __name__ == "__main__":
    main()
