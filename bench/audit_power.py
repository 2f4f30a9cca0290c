"""The audit's power over coin draws: for each benchmark seed, a ``mini`` benchmark with canary
providers, one training per intensity of :data:`INTENSITIES` (non-private ``fedavg``, every run
read as a false claim: the same seed's honest epsilon-1 declaration, tested as its mechanism's
PLD epsilon) and of :data:`PRIVATE` (honest ``dp-lora`` at epsilon 1, 4 and 8), each audited by
``pflkit audit`` (membership canaries and the ``calibrated`` attack by default); then how many draws contradict each claim, the bounds,
the audit's cost beside scoring the test split, and a plot of the bound against training
intensity.

Everything already present under OUT is kept (a run directory with its checkpoint, an audit's
JSON line), so the study can be stopped and resumed, and extended by seeds later; a line
audited with other settings than the evaluator's current defaults is audited again (its
training and scoring time kept).

Usage: ``python -m bench.audit_power --out DIR --seeds 0 1 2 [--kind reconstruction]
[--runs fedavg fedavg-c10 dp-lora-eps1 ...] [--canaries 100] [--record DIR]``; writes
``OUT/audit_power.jsonl`` (one line per audited run), ``OUT/audit_power.md`` and
``OUT/audit_power.png``. With ``--record DIR`` (``docs/results/data``) it writes the results
tables of the ledger's lines there: of membership audits ``audit_power_summary.json`` (one row
per run, :data:`SUMMARY_COLUMNS`) and ``audit_power_draws.json`` (one row per seed of
:data:`DRAWS_LABEL`, :data:`DRAWS_COLUMNS`); of reconstruction audits
``audit_power_reconstruction.json`` (one row per run and seed, :data:`RECONSTRUCTION_COLUMNS`).
``--record-only`` writes them from the ledger as it is, training and auditing nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from bench.auditbench import audit, scoring_seconds
from experiments.pflkit_command import run_pflkit
from experiments.results_file import (
    Column,
    command_line,
    number,
    text,
    write_results_table,
)

#: non-private trainings, weakest first: the ``fedavg`` preset (2 clients of 10 a round, one
#: epoch, 10 rounds), then every client every round
INTENSITIES: dict[str, tuple[str, ...]] = {
    "fedavg": ("--preset", "fedavg"),
    "fedavg-c10": ("--preset", "fedavg", "--clients-per-round", "10"),
    "fedavg-c10-e3": ("--preset", "fedavg", "--clients-per-round", "10", "--local-epochs", "3"),
}
#: honest private trainings (the ``dp-lora`` preset at each epsilon)
PRIVATE: dict[str, tuple[str, ...]] = {
    f"dp-lora-eps{e}": ("--preset", "dp-lora", "--epsilon", str(e)) for e in (1, 4, 8)
}
#: the false claim every non-private run is read as: the declaration of the same seed's honest
#: ``dp-lora`` epsilon-1 run, whose mechanism the audit tests (its PLD epsilon); epsilon 1 itself
#: when that run is missing
FALSE_CLAIM = 1.0
LIAR_DECLARATION = "dp-lora-eps1"


def benchmark(out: Path, seed: int, kind: str, canaries: int) -> Path:
    """``OUT/data/{kind}-s{seed}``, generated unless present."""
    data = out / "data" / f"{kind}-s{seed}"
    if not (data / "benchmark.json").is_file():
        made = run_pflkit("data", "generate", "--out", str(data), "--scale", "mini", "--seed",
                          str(seed), "--canaries", str(canaries), "--canary-kind", kind,
                          "--public-documents", "0", "--workers", "1", "--overwrite")  # fmt: skip
        if made.returncode != 0:
            raise RuntimeError(f"generate failed:\n{made.stderr[-2000:]}")
    return data


def train(data: Path, run: Path, options: tuple[str, ...]) -> float:
    """Train unless ``run/checkpoint`` exists; the wall seconds (0 when kept)."""
    if (run / "checkpoint").is_dir():
        return 0.0
    started = time.perf_counter()
    trained = run_pflkit("train", *options, "--data", str(data), "--out", str(run), "--threads",
                         "1", "--val-limit", "100", "--no-progress", threads=1)  # fmt: skip
    if trained.returncode != 0:
        raise RuntimeError(f"training {run.name} failed:\n{trained.stderr[-2000:]}")
    return time.perf_counter() - started


def read_ledger(path: Path) -> dict[tuple[int, str], dict]:
    """An append-only JSON-lines ledger's rows by (seed, label), a later line replacing an
    earlier one (empty when the file is absent)."""
    rows = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            rows[(row["seed"], row["label"])] = row
    return rows


def val_anls(run: Path) -> float | None:
    """The run's validation ANLS (``--val-limit 100``) as its ``submission.json`` gives it."""
    submission = run / "submission.json"
    if not submission.is_file():
        return None
    return json.loads(submission.read_text(encoding="utf-8")).get("val_anls")


def study(out: Path, seeds: list[int], kind: str, canaries: int, runs: list[str]) -> list[dict]:
    """Generate, train and audit what is missing; every audited run's row."""
    ledger = out / "audit_power.jsonl"
    done = read_ledger(ledger)
    recipes = {**INTENSITIES, **PRIVATE}
    for seed in seeds:
        data = benchmark(out, seed, kind, canaries)
        for label in runs:
            kept = done.get((seed, label))
            if kept is not None and not stale(kept, kind):
                continue
            run = out / "runs" / f"{kind}-s{seed}" / label
            seconds = train(data, run, recipes[label]) or (kept or {}).get("train_seconds", 0.0)
            row = {"seed": seed, "label": label, "kind": kind, "train_seconds": seconds,
                   "val_anls": val_anls(run), **audit([run], data)[0]}  # fmt: skip
            if label in INTENSITIES:
                row["scoring_seconds"] = (kept or {}).get("scoring_seconds") or scoring_seconds(
                    run, data
                )
            done[(seed, label)] = row
            with ledger.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(row) + "\n")
            print(f"seed {seed} {label}: bound {row['audit_epsilon']:.3f}", flush=True)
    return [done[key] for key in sorted(done)]


def stale(row: dict, kind: str) -> bool:
    """Whether a kept row was audited with other settings than the evaluator's defaults (the
    attack, the invoices per canary): its run is audited again, its training kept."""
    from evaluator.canary_audit import (
        DEFAULT_ATTACK,
        DEFAULT_PROBE_DOCUMENTS,
        RECONSTRUCTION_ATTACK,
    )

    attack = DEFAULT_ATTACK if kind == "membership" else RECONSTRUCTION_ATTACK
    return (row.get("attack"), row.get("probe_documents")) != (
        attack,
        DEFAULT_PROBE_DOCUMENTS[kind],
    )


def run_order(rows: list[dict]) -> list[str]:
    """The runs present, weakest non-private training first, then the private ones."""
    present = {r["label"] for r in rows}
    return [label for label in (*INTENSITIES, *PRIVATE) if label in present]


def tested_claim(row: dict, rows: list[dict]) -> tuple[float, float]:
    """(declared, tested) epsilon a run is read against: a private run's own (the tested one
    is its mechanism's by PLD when ``pflkit audit`` reported it); a non-private run is a liar
    submitting the same seed's ``dp-lora`` epsilon-1 declaration."""
    if row["label"] not in INTENSITIES:
        return row["claimed_epsilon"], row.get("tested_epsilon") or row["claimed_epsilon"]
    honest = [r for r in rows if (r["seed"], r["label"]) == (row["seed"], LIAR_DECLARATION)]
    if honest and honest[0].get("tested_epsilon"):
        return honest[0]["claimed_epsilon"], honest[0]["tested_epsilon"]
    return FALSE_CLAIM, FALSE_CLAIM


def run_summaries(rows: list[dict]) -> list[dict[str, Any]]:
    """Per run (:func:`run_order`): its draws' claims, bounds and how many contradict the claim.

    Returns:
        ``{"label", "declared", "tested" (median), "draws", "contradicted", "bounds" (sorted),
        "middle" (the median draw's row), "auc", "tpr" (medians)}`` per run.
    """
    summaries = []
    for label in run_order(rows):
        mine = sorted((r for r in rows if r["label"] == label), key=lambda r: r["audit_epsilon"])
        claims = [tested_claim(r, rows) for r in mine]
        summaries.append({
            "label": label, "declared": claims[0][0],
            "tested": sorted(t for _, t in claims)[len(claims) // 2], "draws": len(mine),
            "contradicted": sum(r["audit_epsilon"] > t for r, (_, t) in zip(mine, claims, strict=True)),
            "bounds": [r["audit_epsilon"] for r in mine], "middle": mine[len(mine) // 2],
            "auc": sorted(r["auc"] for r in mine)[len(mine) // 2],
            "tpr": sorted(r["tpr"] for r in mine)[len(mine) // 2],
        })  # fmt: skip
    return summaries


def audit_cost(rows: list[dict]) -> tuple[float, int] | None:
    """The median of the audits' seconds over the scoring's seconds, and of how many runs."""
    costs = [(r["audit_seconds"], r["scoring_seconds"]) for r in rows if "scoring_seconds" in r]
    if not costs:
        return None
    return sorted(a / s for a, s in costs)[len(costs) // 2], len(costs)


def table(rows: list[dict]) -> str:
    """Markdown: per run, the bound on each draw and how many draws contradict its claim."""
    lines = ["| run | claim: declared (tested, median) | draws | contradicted | "
             "bound: median (min to max) | right of guessed (median) | AUC (median) | "
             "TPR at 10% FPR (median) |",
             "| --- | --- | ---: | ---: | --- | --- | ---: | ---: |"]  # fmt: skip
    for run in run_summaries(rows):
        bounds, middle = run["bounds"], run["middle"]
        lines.append(f"| `{run['label']}` | {run['declared']:g} ({run['tested']:.3f}) | "
                     f"{run['draws']} | {run['contradicted']} of {run['draws']} | "
                     f"{middle['audit_epsilon']:.3f} ({bounds[0]:.3f} to {bounds[-1]:.3f}) | "
                     f"{middle['fdp_correct']} of {middle['fdp_guesses']} | "
                     f"{run['auc']:.3f} | {run['tpr']:.3f} |")  # fmt: skip
    cost = audit_cost(rows)
    if cost is not None:
        lines.append(f"\nAudit per submission against scoring the test split (median of "
                     f"{cost[1]}): {cost[0]:.2f}x; base model's pass once per worker.")  # fmt: skip
    return "\n".join(lines) + "\n"


#: each run as the results tables name it
RUN_TITLES = {
    "fedavg": "`fedavg` preset, non-private (the liar)",
    "fedavg-c10": "`fedavg`, every client every round, non-private (the liar)",
    "fedavg-c10-e3": "`fedavg`, every client every round, 3 local epochs, non-private (the liar)",
    **{label: f"`dp-lora` epsilon {label.removeprefix('dp-lora-eps')}, honest" for label in PRIVATE},
}
#: ``audit_power_summary.json``: per run, its claim, draws, contradictions and median figures
SUMMARY_COLUMNS: tuple[Column, ...] = (
    text("run", "run"),
    text("claim_declared_tested_median", "claim: declared (tested, median)"),
    number("draws", "draws", "int"),
    text("contradicted", "contradicted", align="right"),
    text("bound_median_min_to_max", "bound: median (min to max)"),
    text("right_of_guessed_median", "right of guessed (median)"),
    number("auc_median", "AUC (median)", ".3f"),
    number("tpr_at_10_fpr_median", "TPR at 10% FPR (median)", ".3f"),
)
#: the run whose draws ``audit_power_draws.json`` shows, one row per seed
DRAWS_LABEL = "fedavg"
#: ``audit_power_draws.json``: per seed, the liar's audit, the honest runs' and the audit's cost
DRAWS_COLUMNS: tuple[Column, ...] = (
    number("seed", "seed", "int"),
    number("false_claim_tested", "false claim tested", ".3f"),
    number("bound_f_dp", "bound (f-DP)", ".3f"),
    number("snj_bound", "SNJ bound", ".3f"),
    text("right_of_guessed", "right of guessed"),
    number("auc", "AUC", ".3f"),
    number("tpr_at_10_fpr", "TPR at 10% FPR", ".3f"),
    text("contradicted", "contradicted"),
    text("dp_lora_eps_1_4_8_bound_auc", "`dp-lora` eps 1 / 4 / 8: bound (AUC)"),
    text("audit_scoring_s", "audit / scoring (s)", align="right"),
)
#: ``audit_power_reconstruction.json``: per run and seed, its validation ANLS and its audit
RECONSTRUCTION_COLUMNS: tuple[Column, ...] = (
    number("seed", "seed", "int"),
    text("run", "run"),
    number("val_anls_100_q", "val ANLS (100 q.)", ".4f"),
    number("bound", "bound", ".3f"),
    text("right_of_guessed", "right of guessed", align="right"),
    number("top_1_right_of_100", "top-1 right (of 100)", "int"),
    number("auc_true_vs_wrong_candidates", "AUC (true vs wrong candidates)", ".3f"),
    number("tpr_at_10_fpr", "TPR at 10% FPR", ".3f"),
)


def summary_rows(rows: list[dict]) -> list[dict[str, Any]]:
    """``audit_power_summary.json``'s rows of membership audits' ledger rows."""
    table_rows = []
    for run in run_summaries(rows):
        bounds, middle = run["bounds"], run["middle"]
        table_rows.append({
            "run": RUN_TITLES.get(run["label"], f"`{run['label']}`"),
            "claim_declared_tested_median": f"{run['declared']:g} ({run['tested']:.3f})",
            "draws": run["draws"],
            "contradicted": (f"**{run['contradicted']} of {run['draws']}**" if run["contradicted"]
                             else f"0 of {run['draws']}"),
            "bound_median_min_to_max":
                f"{middle['audit_epsilon']:.3f} ({bounds[0]:.3f} to {bounds[-1]:.3f})",
            "right_of_guessed_median": f"{middle['fdp_correct']} of {middle['fdp_guesses']}",
            "auc_median": round(run["auc"], 3), "tpr_at_10_fpr_median": round(run["tpr"], 3),
        })  # fmt: skip
    return table_rows


def draws_rows(rows: list[dict]) -> list[dict[str, Any]]:
    """``audit_power_draws.json``'s rows: each seed's :data:`DRAWS_LABEL` audit against its false
    claim, the same seed's honest ``dp-lora`` bounds (AUC) and the audit's cost."""
    by_run = {(r["seed"], r["label"]): r for r in rows}
    table_rows = []
    for row in sorted((r for r in rows if r["label"] == DRAWS_LABEL), key=lambda r: r["seed"]):
        tested = tested_claim(row, rows)[1]
        honest = [by_run.get((row["seed"], label)) for label in PRIVATE]
        cost = ""
        if row.get("scoring_seconds"):
            audit_s, scoring_s = row["audit_seconds"], row["scoring_seconds"]
            cost = f"{audit_s:.1f} / {scoring_s:.1f} ({audit_s / scoring_s:.2f}x)"
        table_rows.append({
            "seed": row["seed"], "false_claim_tested": round(tested, 3),
            "bound_f_dp": round(row["fdp_epsilon"], 3), "snj_bound": round(row["snj_epsilon"], 3),
            "right_of_guessed": f"{row['fdp_correct']} of {row['fdp_guesses']}",
            "auc": round(row["auc"], 3), "tpr_at_10_fpr": round(row["tpr"], 3),
            "contradicted": "**yes**" if row["audit_epsilon"] > tested else "no",
            "dp_lora_eps_1_4_8_bound_auc": " / ".join(
                "-" if r is None else f"{round(r['audit_epsilon'], 3):g} ({r['auc']:.2f})"
                for r in honest),
            "audit_scoring_s": cost,
        })  # fmt: skip
    return table_rows


def reconstruction_rows(rows: list[dict]) -> list[dict[str, Any]]:
    """``audit_power_reconstruction.json``'s rows: each run (:func:`run_order`) on each seed.
    The top-1 count is not in the audit's line (its cell is empty)."""
    order = {label: index for index, label in enumerate(run_order(rows))}
    table_rows = []
    for row in sorted(rows, key=lambda r: (order[r["label"]], r["seed"])):
        anls = row.get("val_anls")
        table_rows.append({
            "seed": row["seed"], "run": RUN_TITLES.get(row["label"], f"`{row['label']}`"),
            "val_anls_100_q": "" if anls is None else round(anls, 4),
            "bound": round(row["audit_epsilon"], 3),
            "right_of_guessed": f"{row['fdp_correct']} of {row['fdp_guesses']}",
            "top_1_right_of_100": "", "auc_true_vs_wrong_candidates": round(row["auc"], 3),
            "tpr_at_10_fpr": round(row["tpr"], 3),
        })  # fmt: skip
    return table_rows


def record(rows: list[dict], folder: Path, *, command: str) -> list[Path]:
    """Write the results tables of the ledger's rows into ``folder``; the written paths."""
    membership = [r for r in rows if r.get("kind", "membership") == "membership"]
    reconstruction = [r for r in rows if r.get("kind") == "reconstruction"]
    written = []
    if membership:
        written.append(write_results_table(folder / "audit_power_summary.json", SUMMARY_COLUMNS,
                                           summary_rows(membership), command=command))
        written.append(write_results_table(folder / "audit_power_draws.json", DRAWS_COLUMNS,
                                           draws_rows(membership), command=command))
    if reconstruction:
        written.append(write_results_table(folder / "audit_power_reconstruction.json",
                                           RECONSTRUCTION_COLUMNS,
                                           reconstruction_rows(reconstruction), command=command))
    return written


def plot(rows: list[dict], path: Path) -> None:
    """Both analyses' bounds of every draw against training intensity (one column per run:
    f-DP on the left, Steinke-Nasr-Jagielski on the right)."""
    from benchmark.figures import new_figure, save_figure

    labels = run_order(rows)
    figure, axes = new_figure()
    for name, key, shift, marker in (("f-DP (Gaussian curves)", "fdp_epsilon", -0.12, "o"),
                                     ("Steinke-Nasr-Jagielski", "snj_epsilon", 0.12, "x")):  # fmt: skip
        for index, label in enumerate(labels):
            bounds = [r[key] for r in rows if r["label"] == label]
            axes.scatter([index + shift] * len(bounds), bounds, alpha=0.7, marker=marker,
                         color="C0" if key == "fdp_epsilon" else "C1",
                         label=name if index == 0 else None)  # fmt: skip
    liar = [tested_claim(r, rows)[1] for r in rows if r["label"] in INTENSITIES]
    if liar:
        axes.axhline(sorted(liar)[len(liar) // 2], linestyle="--", color="grey",
                     label="false claim (epsilon 1 declared; its mechanism's epsilon tested)")  # fmt: skip
    axes.set_xticks(range(len(labels)), labels, rotation=20)
    axes.set_ylabel("audit's lower bound on epsilon")
    axes.set_ylim(top=1.45 * max([*(r["fdp_epsilon"] for r in rows), *liar, 1.0]))
    axes.legend(loc="upper right")
    save_figure(figure, path)


def main(argv: list[str] | None = None) -> None:
    """Run the study and write its table and plot."""
    parser = argparse.ArgumentParser(prog="python -m bench.audit_power",
                                     description=__doc__.split("\n\n")[0])  # fmt: skip
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[])
    parser.add_argument("--kind", choices=("membership", "reconstruction"),
                        default="membership")  # fmt: skip
    parser.add_argument("--canaries", type=int, default=100)
    parser.add_argument("--runs", nargs="+", default=[*INTENSITIES, *PRIVATE],
                        choices=[*INTENSITIES, *PRIVATE])  # fmt: skip
    parser.add_argument("--record", type=Path, default=None,
                        help="write the ledger's results tables' data files into this folder "
                             "(docs/results/data)")
    parser.add_argument("--record-only", action="store_true",
                        help="train and audit nothing: write --record from OUT's ledger")
    args = parser.parse_args(argv)
    if args.record_only and args.record is None:
        parser.error("--record-only needs --record")
    if not (args.record_only or args.seeds):
        parser.error("--seeds is needed to run the study")
    command = command_line("bench.audit_power", sys.argv[1:] if argv is None else argv)
    if args.record_only:
        rows = [row for _, row in sorted(read_ledger(args.out / "audit_power.jsonl").items())]
        for path in record(rows, args.record, command=command):
            print(path)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    rows = study(args.out, args.seeds, args.kind, args.canaries, args.runs)
    report = table(rows)
    (args.out / "audit_power.md").write_text(report, encoding="utf-8")
    plot(rows, args.out / "audit_power.png")
    print(report)
    if args.record is not None:
        for path in record(rows, args.record, command=command):
            print(path)


if __name__ == "__main__":
    main()
