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
[--runs fedavg fedavg-c10 dp-lora-eps1 ...] [--canaries 100]``; writes ``OUT/audit_power.jsonl``
(one line per audited run), ``OUT/audit_power.md`` and ``OUT/audit_power.png``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bench.auditbench import audit, scoring_seconds
from experiments.pflkit_command import run_pflkit

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
                   **audit([run], data)[0]}  # fmt: skip
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


def table(rows: list[dict]) -> str:
    """Markdown: per run, the bound on each draw and how many draws contradict its claim."""
    labels = run_order(rows)
    lines = ["| run | claim: declared (tested, median) | draws | contradicted | "
             "bound: median (min to max) | right of guessed (median) | AUC (median) | "
             "TPR at 10% FPR (median) |",
             "| --- | --- | ---: | ---: | --- | --- | ---: | ---: |"]  # fmt: skip
    for label in labels:
        mine = sorted((r for r in rows if r["label"] == label), key=lambda r: r["audit_epsilon"])
        claims = [tested_claim(r, rows) for r in mine]
        tested = sorted(t for _, t in claims)[len(claims) // 2]
        bounds = [r["audit_epsilon"] for r in mine]
        middle = mine[len(mine) // 2]
        hits = sum(r["audit_epsilon"] > t for r, (_, t) in zip(mine, claims, strict=True))
        lines.append(f"| `{label}` | {claims[0][0]:g} ({tested:.3f}) | {len(mine)} | "
                     f"{hits} of {len(mine)} | "
                     f"{middle['audit_epsilon']:.3f} ({bounds[0]:.3f} to {bounds[-1]:.3f}) | "
                     f"{middle['fdp_correct']} of {middle['fdp_guesses']} | "
                     f"{sorted(r['auc'] for r in mine)[len(mine) // 2]:.3f} | "
                     f"{sorted(r['tpr'] for r in mine)[len(mine) // 2]:.3f} |")  # fmt: skip
    costs = [(r["audit_seconds"], r["scoring_seconds"]) for r in rows if "scoring_seconds" in r]
    if costs:
        ratio = sorted(a / s for a, s in costs)[len(costs) // 2]
        lines.append(f"\nAudit per submission against scoring the test split (median of "
                     f"{len(costs)}): {ratio:.2f}x; base model's pass once per worker.")  # fmt: skip
    return "\n".join(lines) + "\n"


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
    parser.add_argument("--seeds", type=int, nargs="+", required=True)
    parser.add_argument("--kind", choices=("membership", "reconstruction"),
                        default="membership")  # fmt: skip
    parser.add_argument("--canaries", type=int, default=100)
    parser.add_argument("--runs", nargs="+", default=[*INTENSITIES, *PRIVATE],
                        choices=[*INTENSITIES, *PRIVATE])  # fmt: skip
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = study(args.out, args.seeds, args.kind, args.canaries, args.runs)
    report = table(rows)
    (args.out / "audit_power.md").write_text(report, encoding="utf-8")
    plot(rows, args.out / "audit_power.png")
    print(report)


if __name__ == "__main__":
    main()
