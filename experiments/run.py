"""The experiments behind docs/results/: the presets on one benchmark, their tables and plots.

``python -m experiments.run --data DIR --out DIR [--track 1|2|3|all] [--parallel 2]``

Every experiment is its own ``pflkit train`` process (one torch thread each, ``--parallel`` at a
time): a finished run is kept, an interrupted one is resumed. During training each round is
validated on ``--val-limit`` questions to keep rounds short; the tables report the final
checkpoint scored on the *whole* validation split by ``pflkit evaluate`` (``RUN/val.json``).

Writes the tables' data files (:mod:`experiments.results_file`, which the results pages
render: copy them to ``docs/results/data/``) ``OUT/track1.json`` (val ANLS, bytes per message,
total bytes, rounds, wall time), ``OUT/track2.json`` (val ANLS per epsilon for the DP presets
next to non-private FedAvg) and the plots ``OUT/track1.png`` (ANLS against bytes) and ``OUT/track2.png`` (ANLS against epsilon).

``--track 3`` trains ``fedavg-ft``, ``local-only``, ``pfedcr``, ``fedp3``, ``feddat`` and
``lora-10rounds`` (the ``lora`` preset over 10 rounds: LoRA FedAvg at FedDAT's adapter budget)
(run directories ``OUT/track3-<name>-seed0``; ``--only`` trains some of them), scores every
submission with the track-3 scoring on the test split (``RUN/personal_test.json``) and writes
``OUT/track3.json``, the per-client plot ``OUT/track3.png`` and its data ``OUT/track3_clients.csv``
with a row for every run there.
Two global-only rows come without training: ``base`` (the shipped base) and ``fedavg``, the
global model of the ``fedavg-ft`` run (when it is there), which is the ``fedavg`` preset's model
bit for bit (the fine-tuning comes after its 10 rounds), with its 10 rounds' bytes.

``--track fsp`` runs issue 16's federated self-pretraining table (not part of ``all``; run
directories ``OUT/<name>``, ``--only`` trains some of them): ``fedavg``, ``fedadam`` and
``fedavgm`` without pre-training, the same after 10 FSP rounds with that server optimiser while
pre-training and FedAvg while fine-tuning (the pilot study's protocol), FSP (FedAvg) with
each objective alone, and ``fedavg``, ``fsp-fedavg`` and ``fsp-fedavgm`` again at training seed 1
(``-seed1``); every run fine-tunes for the ``fedavg`` preset's 10 rounds and, at one seed, samples
the same clients in them. Writes ``OUT/fsp.json`` (:mod:`experiments.fsp_report`).

``--track dp-scale`` runs issue 17's table on a ``dp``-scale benchmark (not part of ``all``;
``--only`` trains some runs): ``dp-fedavg-competition`` and ``dp-lora-competition`` at epsilon
1, 4 and 8 over seeds 0 and 1, ``fedavg`` over 5 rounds, seed 0 of each DP preset without
clipping or noise, and the clipping table's ``dp-fedavg-competition`` runs at epsilon 8
(:data:`~experiments.catalog.DP_SCALE_CLIPPING`); every declaration checked by ``pflkit dp
verify``. Writes ``OUT/dp_scale_anls.json``, ``OUT/dp_scale_cost.json`` and
``OUT/dp_scale_clipping.json`` (:mod:`experiments.dp_scale_report`), ``OUT/dp_scale.png`` and
``OUT/dp_scale_rounds.png``.

``--track optimiser`` runs issue 15's comparisons (not part of ``all``): ``fedavg`` and
``fedshampoo`` trained one round at a time with every round's checkpoint scored on the whole val
and test splits (:mod:`experiments.round_scores`; ``OUT/optimiser_track1.json`` with the rounds and
bytes to the benchmark's threshold, ``OUT/optimiser_track1.png``), and
``dp-fedavg``, ``dp-clgecl`` (momentum SGD) and ``dp-clgecl`` with AdamW at epsilon 1, 4 and 8,
each declaration checked by ``pflkit dp verify`` (``RUN/verify.json``;
``OUT/optimiser_track2.json``, ``OUT/optimiser_track2.png``), and the 1,000x search's LoRA + NF4
recipes (``OUT/optimiser_recipes.json``). ``--only NAME,...`` restricts it to some runs, so that
each can be started in a CPU slot of its own.

This module is the command; the runs are data in :mod:`experiments.catalog`, trained by
:mod:`experiments.runner`, scored by :mod:`experiments.scoring` and tabulated and plotted by
:mod:`experiments.tables`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmark.threshold import THRESHOLD_KEY
from experiments.catalog import (
    CLGECL_TRACK2,
    DP_SCALE,
    DP_SCALE_CLIPPING,
    DP_SCALE_SEEDS,
    EPSILONS,
    FSP,
    OPTIMISER_ROUNDS,
    OPTIMISER_TRACK1,
    OPTIMISER_TRACK2_METHODS,
    RECIPES,
    TRACK1,
    TRACK1_PROBES,
    TRACK2,
    TRACK3,
    DPScaleExperiment,
    Experiment,
)
from experiments.dp_scale_report import (
    DPScaleRun,
    anls_and_cost_tables,
    clipping_table,
    dp_scale_table,
    plot_dp_scale,
    plot_round_curves,
    read_dp_scale_run,
)
from experiments.fsp_report import fsp_table, read_fsp_run
from experiments.personal_report import per_client_csv, personal_table, plot_per_client
from experiments.report import plot_anls_vs_bytes, read_run, runs_table
from experiments.results_file import Table, command_line
from experiments.round_scores import read_round_scores, train_round_by_round
from experiments.runner import run_experiment, run_selected
from experiments.scoring import full_val_report, score_split, verify_privacy
from experiments.tables import (
    optimiser_track1,
    plot_anls_vs_epsilon,
    plot_round_scores,
    recipes_table,
    track2_table,
    track3,
)


def optimiser_experiments(args: argparse.Namespace) -> None:
    """Issue 15: ``fedavg`` against ``fedshampoo`` round by round, DP-CLGECL beside DP-FedAvg."""
    wanted = set(args.only.split(",")) if args.only else None
    track1 = [e for e in OPTIMISER_TRACK1 if wanted is None or e.name in wanted]
    track2 = [
        e for e in (*TRACK2[: len(EPSILONS)], *CLGECL_TRACK2) if wanted is None or e.name in wanted
    ]
    recipes = [e for e in RECIPES if wanted is None or e.name in wanted]
    args.out.mkdir(parents=True, exist_ok=True)
    stated = json.loads((args.data / "benchmark.json").read_text(encoding="utf-8"))
    threshold = stated.get(THRESHOLD_KEY)

    seed = ("--seed", str(args.seed)) if args.seed else ()

    def one(experiment: Experiment) -> None:
        if experiment in OPTIMISER_TRACK1:
            train_round_by_round(
                args.out / experiment.name,
                experiment.preset,
                OPTIMISER_ROUNDS,
                args.data,
                args.base,
                (*experiment.options, *seed),
            )
            return
        run = run_experiment(experiment, args.data, args.out, args.base, args.val_limit, seed)
        if experiment in RECIPES:
            score_split(str(run / "checkpoint"), args.data, run / "test.json", split="test")

    with ThreadPoolExecutor(max_workers=args.parallel) as pool:
        list(pool.map(one, (*track1, *recipes, *track2)))
    write(recipes_table(args.out, threshold), args, "optimiser_recipes.json")
    table, scores = optimiser_track1(args.out, threshold)
    write(table, args, "optimiser_track1.json")
    plot_round_scores(scores, args.out / "optimiser_track1.png", threshold)
    methods = OPTIMISER_TRACK2_METHODS
    for experiment in track2:
        verify_privacy(args.out / experiment.name)
    fedavg = read_round_scores(args.out / "fedavg")
    fedavg_report = (
        dataclasses.replace(read_run(args.out / "fedavg"), val_anls=fedavg[-1].val_anls)
        if fedavg
        else None
    )
    write(track2_table(args.out, fedavg_report, methods), args, "optimiser_track2.json")
    plot_anls_vs_epsilon(args.out, fedavg_report, args.out / "optimiser_track2.png", methods)


def fsp_experiments(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Issue 16: train (or keep) the selected :data:`FSP` runs, then tabulate every finished one."""
    run_selected(FSP, args, parser)
    rows = [
        read_fsp_run(args.out / e.name) for e in FSP if (args.out / e.name / "val.json").is_file()
    ]
    write(fsp_table(rows), args, "fsp.json")


def finished_dp_scale_runs(experiments: Sequence[DPScaleExperiment], out: Path) -> list[DPScaleRun]:
    """The experiments' scored runs under ``out``, each private one's declaration verified."""
    runs: list[DPScaleRun] = []
    for experiment in experiments:
        run = out / experiment.name
        if not (run / "val.json").is_file():
            continue
        if experiment.budget.startswith("eps"):
            verify_privacy(run)
        runs.append(read_dp_scale_run(run, experiment.preset, experiment.budget, experiment.seed))
    return runs


def dp_scale_experiments(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Issue 17: train (or keep) the selected :data:`DP_SCALE` and :data:`DP_SCALE_CLIPPING`
    runs, verify every declaration, score the base, then tabulate and plot every finished run."""
    run_selected((*DP_SCALE, *DP_SCALE_CLIPPING), args, parser)
    base_anls = score_split(args.base, args.data, args.out / "base" / "val.json")
    runs = finished_dp_scale_runs(DP_SCALE, args.out)
    runs.sort(key=lambda r: (r.preset != "fedavg", r.preset, r.budget or "z", r.seed))
    anls, cost = anls_and_cost_tables(
        dp_scale_table(runs, base_anls, DP_SCALE_SEEDS), DP_SCALE_SEEDS
    )
    write(anls, args, "dp_scale_anls.json")
    write(cost, args, "dp_scale_cost.json")
    clipping = finished_dp_scale_runs(DP_SCALE_CLIPPING, args.out)
    write(clipping_table([*runs, *clipping], base_anls), args, "dp_scale_clipping.json")
    plot_dp_scale(runs, base_anls, args.out / "dp_scale.png")
    plot_round_curves([r for r in runs if r.seed == 0], base_anls, args.out / "dp_scale_rounds.png")


def main(argv: Sequence[str] | None = None) -> None:
    """Run the experiments, then write the tables and plots."""
    parser = argparse.ArgumentParser(
        prog="python -m experiments.run", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--data", type=Path, required=True, help="benchmark directory")
    parser.add_argument("--out", type=Path, required=True, help="where the runs go")
    parser.add_argument(
        "--track",
        choices=("1", "2", "3", "optimiser", "fsp", "dp-scale", "all"),
        default="all",
        help="optimiser: issue 15's runs (fedshampoo, "
        "dp-clgecl); fsp: issue 16's federated self-pretraining; dp-scale: "
        "issue 17's competition DP presets on the dp scale; not in all",
    )
    parser.add_argument("--base", default="base", help="pre-trained checkpoint (default: base)")
    parser.add_argument("--parallel", type=int, default=2, help="runs at a time")
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="--track optimiser: the training seed of every run (use another "
        "--out per seed; the other tracks name their seeds per run)",
    )
    parser.add_argument(
        "--val-limit", type=int, default=100, help="questions validated after each round"
    )
    parser.add_argument(
        "--only",
        help="track 3, fsp and dp-scale: train only these "
        "(comma-separated, e.g. pfedcr,lora-10rounds or fsp-fedavg,fsp-tm or "
        "dp-lora-competition-eps8-seed0); --track optimiser: these run names only",
    )
    args = parser.parse_args(argv)
    args.command = command_line("experiments.run", sys.argv[1:] if argv is None else argv)
    if args.track == "optimiser":
        optimiser_experiments(args)
    elif args.track == "fsp":
        fsp_experiments(args, parser)
    elif args.track == "dp-scale":
        dp_scale_experiments(args, parser)
    elif args.track == "3":
        track3_experiments(args, parser)
    else:
        track12_experiments(args)


def track3_experiments(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Train (or keep) the selected :data:`TRACK3` runs, score them with the base and fedavg on
    the personal test splits, then write the table, the per-client plot and its data."""
    run_selected(TRACK3, args, parser)
    reports = track3(args.data, args.out, args.base)
    write(personal_table(reports), args, "track3.json")
    plot_per_client(reports, args.out / "track3.png")
    (args.out / "track3_clients.csv").write_text(per_client_csv(reports), encoding="utf-8")


def track12_experiments(args: argparse.Namespace) -> None:
    """Tracks 1 and 2 (``--track 1``, ``2`` or ``all``): train (or keep) the runs, then write
    track 1's table and plot and, unless only track 1, track 2's."""
    track1 = (*TRACK1, *TRACK1_PROBES)
    experiments = {"1": track1, "2": (TRACK1[0], *TRACK2), "all": (*track1, *TRACK2)}[args.track]
    args.out.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=args.parallel) as pool:
        list(
            pool.map(
                lambda e: run_experiment(e, args.data, args.out, args.base, args.val_limit),
                experiments,
            )
        )
    reports = [
        full_val_report(args.out / e.name)
        for e in track1
        if (args.out / e.name / "val.json").is_file()
    ]
    fedavg = next((r for r in reports if r.method == "fedavg"), None)
    write(runs_table(reports), args, "track1.json")
    plot_anls_vs_bytes(reports, args.out / "track1.png")
    if args.track != "1":
        write(track2_table(args.out, fedavg), args, "track2.json")
        plot_anls_vs_epsilon(args.out, fedavg, args.out / "track2.png")


def write(table: Table, args: argparse.Namespace, name: str) -> None:
    """Write a table's data file ``OUT/NAME`` with this command as its provenance."""
    print(f"table: {table.write(args.out / name, command=args.command)}")


if __name__ == "__main__":
    main()
