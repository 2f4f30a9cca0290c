"""The privacy audit's figures on ``mini`` with canaries: how strongly must a model train on the
canaries before the one-run bound turns positive, do private runs stay under their claims, and
what the audit costs beside the scoring.

On a ``mini`` benchmark generated with canary providers (``pflkit data generate --canaries M
--canary-documents D``), it trains (or keeps) every run of :data:`RUNS` with ``pflkit train``
and scores it on val (``experiments.run.run_experiment``), writes the dishonest submission (the strongest non-private run with the epsilon-1 run's
``privacy.json``: same benchmark, a false claim), audits all of them in one ``pflkit audit``
(the base model's pass over the probes is made once), times ``pflkit evaluate --split test`` on
one checkpoint for the cost comparison, and writes ``OUT/audit.md`` (also printed). Figures
are printed and written, not asserted (the end-to-end flag is a slow test,
``tests/evaluator/test_privacy_audit.py``).

Usage: ``python -m bench.auditbench --data DIR --out DIR [--parallel 2] [--record PATH]``;
``--record PATH`` also writes the table as that data file (``docs/results/data/audit_mini.json``,
:func:`table_columns`: one row per audited run).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from experiments.catalog import Experiment
from experiments.pflkit_command import run_pflkit
from experiments.results_file import Column, command_line, number, text, write_results_table
from experiments.runner import run_experiment

#: every client each round, three local epochs: the training that gave a bound on ``tiny``
STRONG = ("--clients-per-round", "10", "--local-epochs", "3")


RUNS = (
    Experiment("fedavg-strong", "fedavg", (*STRONG, "--rounds", "3")),
    *(Experiment(f"dp-lora-eps{e}", "dp-lora", ("--clients-per-round", "10", "--rounds", "10",
                                                 "--epsilon", str(e))) for e in (1, 4, 8)),
)
#: the dishonest submission: this run's model with the epsilon-1 run's declaration
LIAR = ("fedavg-strong", "dp-lora-eps1")


def write_liar(out: Path) -> Path:
    """``OUT/<model>-claims-<claim>``: a copy of the model's checkpoint with the claim's
    ``privacy.json`` (replaced whole, so a rerun starts from the same files)."""
    model, claim = (out / name for name in LIAR)
    target = out / f"{model.name}-claims-{claim.name.removeprefix('dp-lora-')}"
    staging = target.with_name(f".{target.name}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(model / "checkpoint", staging / "checkpoint")
    shutil.copy(claim / "privacy.json", staging / "privacy.json")
    shutil.rmtree(target, ignore_errors=True)
    staging.replace(target)
    return target


def audit(runs: list[Path], data: Path) -> list[dict]:
    """``pflkit audit --json`` on every run, one row each.

    Raises:
        RuntimeError: when the audit fails.
    """
    audited = run_pflkit("audit", *map(str, runs), "--data", str(data), "--threads", "1", "--json",
                         threads=1)
    if audited.returncode != 0:
        raise RuntimeError(f"audit failed:\n{audited.stderr[-2000:]}")
    return [json.loads(line) for line in audited.stdout.splitlines() if line.startswith("{")]


def scoring_seconds(run: Path, data: Path) -> float:
    """Wall seconds of ``pflkit evaluate --split test`` on the run's checkpoint (one thread)."""
    started = time.perf_counter()
    scored = run_pflkit("evaluate", str(run / "checkpoint"), "--data", str(data), "--split",
                        "test", "--json", threads=1)
    if scored.returncode != 0:
        raise RuntimeError(f"scoring failed:\n{scored.stderr[-2000:]}")
    return time.perf_counter() - started


def table(rows: list[dict], scoring: float) -> str:
    """Markdown: one line per audited run, then the costs."""
    lines = ["| run | claim (delta) | `question`: bound | AUC | TPR at FPR | guesses right | "
             "`secret` AUC | contradicted | audit |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |"]
    for row in rows:
        claim = "none" if row["claimed_epsilon"] is None else f"{row['claimed_epsilon']:g}"
        secret = row["auc_by_attack"].get("secret")  # absent unless the audit ran that attack
        lines.append(
            f"| {Path(row['run']).name} | {claim} ({row['delta']:g}) | "
            f"{row['audit_epsilon']:.3f} | {row['auc']:.3f} | {row['tpr']:.3f} at "
            f"{row['fpr']:.3f} | {row['correct']} of {row['guesses']} | "
            f"{'' if secret is None else f'{secret:.3f}'} | "
            f"{'yes' if row['contradicted'] else 'no'} | "
            f"{row['audit_seconds']:.1f} s |")
    base = rows[0]["base_seconds"] if rows else 0.0
    lines.append(f"\nbase model's pass over the probes (once per worker): {base:.1f} s; "
                 f"scoring one checkpoint on the test split: {scoring:.1f} s\n")
    return "\n".join(lines)


def canary_count(data: Path) -> int:
    """The canaries of a benchmark generated with ``--canaries M``."""
    coins = json.loads((data / "evaluator" / "canaries.json").read_text(encoding="utf-8"))
    return len(coins["canaries"])


def table_columns(attack: str, canaries: int) -> tuple[Column, ...]:
    """The results table's columns (``docs/results/data/audit_mini.json``) of audits by
    ``attack`` of ``canaries`` membership canaries (each plan's level in the bound's label)."""
    from bench.audit_ceiling import level_text, membership_level

    level = level_text(membership_level(canaries))
    return (
        text("run", "run"),
        text("claim_delta", "claim (delta)", align="right"),
        number(f"{attack}_bound", f"`{attack}`: bound ({level}, SNJ or f-DP)", ".3f"),
        number("auc", "AUC", ".3f"),
        text("tpr_at_fpr", "TPR at FPR", align="right"),
        text("guesses_right", "guesses right", align="right"),
        number("secret_auc", "`secret` AUC", ".3f"),
        text("contradicted", "contradicted"),
        text("audit", "audit", align="right"),
    )


def table_rows(rows: list[dict]) -> list[dict[str, Any]]:
    """The results table's rows of ``pflkit audit --json``'s rows, one per audited run (the
    bound under the key of the rows' attack; no ``secret`` AUC where that attack was not run)."""
    table_rows = []
    for row in rows:
        claim = "none" if row["claimed_epsilon"] is None else f"{row['claimed_epsilon']:g}"
        secret = row["auc_by_attack"].get("secret")
        table_rows.append({
            "run": Path(row["run"]).name, "claim_delta": f"{claim} ({row['delta']:g})",
            f"{row.get('attack', 'question')}_bound": round(row["audit_epsilon"], 3),
            "auc": round(row["auc"], 3), "tpr_at_fpr": f"{row['tpr']:.3f} at {row['fpr']:.3f}",
            "guesses_right": f"{row['correct']} of {row['guesses']}",
            "secret_auc": "" if secret is None else round(secret, 3),
            "contradicted": "**yes**" if row["contradicted"] else "no",
            "audit": f"{row['audit_seconds']:.1f} s",
        })  # fmt: skip
    return table_rows


def main(argv: list[str] | None = None) -> None:
    """Train, audit, time and tabulate."""
    parser = argparse.ArgumentParser(prog="python -m bench.auditbench",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True,
                        help="a benchmark generated with --canaries")
    parser.add_argument("--out", type=Path, required=True, help="where the runs go")
    parser.add_argument("--parallel", type=int, default=2, help="trainings at a time")
    parser.add_argument("--record", type=Path, default=None,
                        help="write the table as this results table's data file "
                             "(docs/results/data/NAME.json, shown by a results page)")
    args = parser.parse_args(argv)
    if not (args.data / "evaluator" / "canaries.json").is_file():
        parser.error(f"{args.data} has no canaries: generate it with `pflkit data generate "
                     "--canaries M`")
    args.out.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=args.parallel) as pool:
        trained = list(pool.map(lambda run: run_experiment(run, args.data, args.out, "base", 0),
                                RUNS))
    runs = [*trained, write_liar(args.out)]
    rows = audit(runs, args.data)
    report = table(rows, scoring_seconds(trained[0], args.data))
    (args.out / "audit.md").write_text(report, encoding="utf-8")
    print(report)
    if args.record is not None:
        columns = table_columns(rows[0].get("attack", "question"), canary_count(args.data))
        command = command_line("bench.auditbench", sys.argv[1:] if argv is None else argv)
        print(write_results_table(args.record, columns, table_rows(rows), command=command))


if __name__ == "__main__":
    main()
