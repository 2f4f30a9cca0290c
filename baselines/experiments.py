"""The README's experiments: the presets on one benchmark, their tables and plots.

``python -m baselines.experiments --data DIR --out DIR [--track 1|2|3|all] [--parallel 2]``

Every experiment is its own ``pflkit train`` process (one torch thread each, ``--parallel`` at a
time): a finished run is kept, an interrupted one is resumed. During training each round is
validated on ``--val-limit`` questions to keep rounds short; the tables report the final
checkpoint scored on the *whole* validation split by ``pflkit evaluate`` (``RUN/val.json``).

Writes ``OUT/track1.md`` (val ANLS, bytes per message, total bytes, rounds, wall time),
``OUT/track2.md`` (val ANLS per epsilon for the DP presets next to non-private FedAvg) and the
plots ``OUT/track1.png`` (ANLS against bytes) and ``OUT/track2.png`` (ANLS against epsilon).

``--track 3`` trains ``fedavg-ft`` and ``local-only`` (run directories
``OUT/track3-<preset>-seed0``), scores every submission with the track-3 scoring on the test
split (``RUN/personal_test.json``) and writes ``OUT/track3.md`` and the per-client plot
``OUT/track3.png``. Two global-only rows come without training: ``base`` (the shipped base) and
``fedavg``, the global model of the ``fedavg-ft`` run, which is the ``fedavg`` preset's model
bit for bit (the fine-tuning comes after its 10 rounds), with its 10 rounds' bytes.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from baselines.personal_report import SCORES, PersonalReport, plot_per_client, read_personal
from baselines.personal_report import markdown_table as personal_table
from baselines.report import RunReport, markdown_table, plot_anls_vs_bytes, read_run
from benchmark.figures import new_figure, save_figure

EPSILONS = (1, 4, 8)
DP_METHODS = ("dp-fedavg", "dp-lora")


@dataclass(frozen=True)
class Experiment:
    """One ``pflkit train`` run: its directory name, preset and extra options."""

    name: str
    preset: str
    options: tuple[str, ...] = ()


TRACK1 = tuple(Experiment(name, name) for name in ("fedavg", "lora", "lora-1client", "lora-nf4"))
#: What the ``lora`` preset's choices are worth on ``mini`` (README, "Federated baselines"), all
#: over FedAvg's 10 rounds: the winner's targets (rank 6 on q and v), the preset's adapters at
#: half its rounds, feed-forward layers only, and a rank-32 probe of the capacity that closes
#: the gap at 10 rounds.
TRACK1_PROBES = (
    Experiment("lora-qv-r6", "lora", ("--rounds", "10", "--lora-rank", "6",
                                      "--lora-targets", "q,v", "--lr", "1e-3")),
    Experiment("lora-10rounds", "lora", ("--rounds", "10")),
    Experiment("lora-ffn-r4", "lora", ("--rounds", "10", "--lora-rank", "4",
                                       "--lora-targets", "wi,wo")),
    Experiment("lora-r32", "lora", ("--rounds", "10", "--lora-rank", "32", "--lr", "1e-3")),
)
TRACK2 = tuple(
    Experiment(f"{method}-eps{epsilon}", method, ("--epsilon", str(epsilon)))
    for method in DP_METHODS
    for epsilon in EPSILONS
)


TRACK3 = (Experiment("track3-fedavg-ft-seed0", "fedavg-ft"),
          Experiment("track3-local-only-seed0", "local-only"))


def _pflkit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pflkit", *args], capture_output=True,
                          text=True, check=False)


def run_experiment(experiment: Experiment, data: Path, out: Path, base: str,
                   val_limit: int, extra: Sequence[str] = ()) -> Path:
    """Train (or resume, or keep) one run and score its checkpoint on the whole val split.

    Raises:
        RuntimeError: when training or scoring fails (with the command's last output).
    """
    run = out / experiment.name
    if not (run / "submission.json").is_file():
        resume = ("--resume",) if (run / "config.json").is_file() else ()
        trained = _pflkit("train", "--method", experiment.preset, "--data", str(data),
                          "--out", str(run), "--base", base, "--val-limit", str(val_limit),
                          "--threads", "1", "--no-progress", *experiment.options, *extra,
                          *resume)
        if trained.returncode != 0:
            raise RuntimeError(f"{experiment.name}: training failed:\n{trained.stderr[-2000:]}")
    scores = run / "val.json"
    if not scores.is_file():
        scored = _pflkit("evaluate", str(run / "checkpoint"), "--data", str(data),
                         "--split", "val", "--json")
        if scored.returncode != 0:
            raise RuntimeError(f"{experiment.name}: scoring failed:\n{scored.stderr[-2000:]}")
        staging = scores.with_suffix(".json.tmp")
        staging.write_text(scored.stdout, encoding="utf-8")
        staging.replace(scores)
    print(f"done: {experiment.name}", flush=True)
    return run


def full_val_report(run: Path) -> RunReport:
    """The run's figures with the val ANLS of the whole split."""
    anls = json.loads((run / "val.json").read_text(encoding="utf-8"))["anls"]
    return dataclasses.replace(read_run(run), val_anls=anls)


def track2_table(out: Path, fedavg: RunReport | None) -> str:
    """Markdown: one row per DP method, one column per epsilon, FedAvg as the non-private row."""
    header = "| method | " + " | ".join(f"epsilon {e}" for e in EPSILONS) + " | non-private |"
    lines = [header, "| --- |" + " ---: |" * (len(EPSILONS) + 1)]
    for method in DP_METHODS:
        cells = []
        for epsilon in EPSILONS:
            run = out / f"{method}-eps{epsilon}"
            if not (run / "val.json").is_file():
                cells.append("n/a")
                continue
            declaration = json.loads((run / "privacy.json").read_text(encoding="utf-8"))
            anls = full_val_report(run).val_anls
            cells.append(f"{anls:.4f} (sigma {declaration['noise_multiplier']:.3f})")
        lines.append(f"| `{method}` | " + " | ".join(cells) + " | |")
    if fedavg is not None:
        lines.append("| `fedavg` |" + " |" * len(EPSILONS) + f" {fedavg.val_anls:.4f} |")
    return "\n".join(lines) + "\n"


def plot_anls_vs_epsilon(out: Path, fedavg: RunReport | None, target: Path) -> Path:
    """Val ANLS against epsilon, one line per DP method, FedAvg as a horizontal line."""
    figure, axes = new_figure()
    for method in DP_METHODS:
        points = [(e, full_val_report(out / f"{method}-eps{e}").val_anls) for e in EPSILONS
                  if (out / f"{method}-eps{e}" / "val.json").is_file()]
        if points:
            axes.plot(*zip(*points, strict=True), marker="o", label=method)
    if fedavg is not None:
        axes.axhline(fedavg.val_anls, linestyle="--", color="grey", label="fedavg (no DP)")
    axes.set_xlabel("epsilon (delta 1e-5, provider level)")
    axes.set_ylabel("validation ANLS (whole split)")
    axes.set_xticks(EPSILONS)
    axes.grid(True, alpha=0.3)
    axes.legend()
    return save_figure(figure, target)


def score_personal(directory: Path, checkpoint: str, data: Path) -> Path:
    """Track-3 scores of a checkpoint with ``directory/personal`` on the test split, kept in
    ``directory/personal_test.json`` (an empty ``personal/`` is written when there is none).

    Raises:
        RuntimeError: when scoring fails.
    """
    from benchmark.data import count_clients
    from benchmark.model import write_personalisations

    target = directory / SCORES
    if target.is_file():
        return target
    if not (directory / "personal").is_dir():
        write_personalisations(directory / "personal", {}, count_clients(data))
    scored = _pflkit("evaluate", checkpoint, "--data", str(data), "--split", "test",
                     "--personal", str(directory / "personal"), "--json")
    if scored.returncode != 0:
        raise RuntimeError(f"{directory.name}: scoring failed:\n{scored.stderr[-2000:]}")
    staging = target.with_suffix(".json.tmp")
    staging.write_text(scored.stdout.strip().splitlines()[-1] + "\n", encoding="utf-8")
    staging.replace(target)
    return target


def track3(data: Path, out: Path, base: str) -> list[PersonalReport]:
    """Score base, fedavg (global only), local-only and fedavg-ft on the personal test splits."""
    fedavg_ft, local_only = (out / e.name for e in TRACK3)
    score_personal(out / "track3-base-seed0", base, data)
    score_personal(out / "track3-fedavg-seed0", str(fedavg_ft / "checkpoint"), data)
    for run in (local_only, fedavg_ft):
        score_personal(run, str(run / "checkpoint"), data)
    submission = json.loads((fedavg_ft / "submission.json").read_text(encoding="utf-8"))
    with (fedavg_ft / "communication_log.csv").open(encoding="utf-8") as stream:
        federated = sum(int(row["amount_of_bytes"]) for row in csv.DictReader(stream)
                        if int(row["federated_round"]) <= submission["rounds"])
    timing = submission["timing"]
    return [
        read_personal(out / "track3-base-seed0"),
        read_personal(out / "track3-fedavg-seed0", total_bytes=federated,
                      wall_seconds=timing["wall"] - timing.get("personalisation", 0.0)),
        read_personal(local_only),
        read_personal(fedavg_ft),
    ]


def main(argv: Sequence[str] | None = None) -> None:
    """Run the experiments, then write the tables and plots."""
    parser = argparse.ArgumentParser(prog="python -m baselines.experiments",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="benchmark directory")
    parser.add_argument("--out", type=Path, required=True, help="where the runs go")
    parser.add_argument("--track", choices=("1", "2", "3", "all"), default="all")
    parser.add_argument("--base", default="base", help="pre-trained checkpoint (default: base)")
    parser.add_argument("--parallel", type=int, default=2, help="runs at a time")
    parser.add_argument("--val-limit", type=int, default=100,
                        help="questions validated after each round")
    args = parser.parse_args(argv)
    if args.track == "3":
        args.out.mkdir(parents=True, exist_ok=True)
        with ThreadPoolExecutor(max_workers=args.parallel) as pool:
            list(pool.map(lambda e: run_experiment(e, args.data, args.out, args.base,
                                                   args.val_limit), TRACK3))
        reports = track3(args.data, args.out, args.base)
        (args.out / "track3.md").write_text(personal_table(reports), encoding="utf-8")
        plot_per_client(reports, args.out / "track3.png")
        print(personal_table(reports))
        return
    track1 = (*TRACK1, *TRACK1_PROBES)
    experiments = {"1": track1, "2": (TRACK1[0], *TRACK2), "all": (*track1, *TRACK2)}[args.track]
    args.out.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=args.parallel) as pool:
        list(pool.map(lambda e: run_experiment(e, args.data, args.out, args.base,
                                               args.val_limit), experiments))
    reports = [full_val_report(args.out / e.name) for e in track1
               if (args.out / e.name / "val.json").is_file()]
    fedavg = next((r for r in reports if r.method == "fedavg"), None)
    (args.out / "track1.md").write_text(markdown_table(reports), encoding="utf-8")
    plot_anls_vs_bytes(reports, args.out / "track1.png")
    print(markdown_table(reports))
    if args.track != "1":
        (args.out / "track2.md").write_text(track2_table(args.out, fedavg), encoding="utf-8")
        plot_anls_vs_epsilon(args.out, fedavg, args.out / "track2.png")
        print(track2_table(args.out, fedavg))


if __name__ == "__main__":
    main()
