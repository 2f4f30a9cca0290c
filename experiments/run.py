"""The experiments behind docs/results/: the presets on one benchmark, their tables and plots.

``python -m experiments.run --data DIR --out DIR [--track 1|2|3|all] [--parallel 2]``

Every experiment is its own ``pflkit train`` process (one torch thread each, ``--parallel`` at a
time): a finished run is kept, an interrupted one is resumed. During training each round is
validated on ``--val-limit`` questions to keep rounds short; the tables report the final
checkpoint scored on the *whole* validation split by ``pflkit evaluate`` (``RUN/val.json``).

Writes ``OUT/track1.md`` (val ANLS, bytes per message, total bytes, rounds, wall time),
``OUT/track2.md`` (val ANLS per epsilon for the DP presets next to non-private FedAvg) and the
plots ``OUT/track1.png`` (ANLS against bytes) and ``OUT/track2.png`` (ANLS against epsilon).

``--track 3`` trains ``fedavg-ft``, ``local-only``, ``pfedcr``, ``fedp3``, ``feddat`` and
``lora-10rounds`` (the ``lora`` preset over 10 rounds: LoRA FedAvg at FedDAT's adapter budget)
(run directories ``OUT/track3-<name>-seed0``; ``--only`` trains some of them), scores every
submission with the track-3 scoring on the test split (``RUN/personal_test.json``) and writes
``OUT/track3.md``, the per-client plot ``OUT/track3.png`` and its data ``OUT/track3_clients.csv``
with a row for every run there.
Two global-only rows come without training: ``base`` (the shipped base) and ``fedavg``, the
global model of the ``fedavg-ft`` run (when it is there), which is the ``fedavg`` preset's model
bit for bit (the fine-tuning comes after its 10 rounds), with its 10 rounds' bytes.

``--track fsp`` runs issue 16's federated self-pretraining table (not part of ``all``; run
directories ``OUT/<name>``, ``--only`` trains some of them): ``fedavg``, ``fedadam`` and
``fedavgm`` without pre-training, the same after 10 FSP rounds with that server optimiser while
pre-training and FedAvg while fine-tuning (the pilot study's protocol), and FSP (FedAvg) with
each objective alone; every run fine-tunes for the ``fedavg`` preset's 10 rounds and samples
the same clients in them. Writes ``OUT/fsp.md`` (:mod:`experiments.fsp_report`).

``--track dp-scale`` runs issue 17's table on a ``dp``-scale benchmark (not part of ``all``;
``--only`` trains some runs): ``dp-fedavg-competition`` and ``dp-lora-competition`` at epsilon
1, 4 and 8 over seeds 0 and 1, ``fedavg`` over 5 rounds, and seed 0 of each DP preset without
clipping or noise; every declaration checked by ``pflkit dp verify``. Writes ``OUT/dp_scale.md``
(:mod:`experiments.dp_scale_report`), ``OUT/dp_scale.png`` and ``OUT/dp_scale_rounds.png``.

``--track optimiser`` runs issue 15's comparisons (not part of ``all``): ``fedavg`` and
``fedshampoo`` trained one round at a time with every round's checkpoint scored on the whole val
and test splits (:mod:`experiments.round_scores`; ``OUT/optimiser_track1.md`` with the rounds and
bytes to the threshold that fedavg's final test ANLS implies, ``OUT/optimiser_track1.png``), and
``dp-fedavg``, ``dp-clgecl`` (momentum SGD) and ``dp-clgecl`` with AdamW at epsilon 1, 4 and 8,
each declaration checked by ``pflkit dp verify`` (``RUN/verify.json``;
``OUT/optimiser_track2.md``, ``OUT/optimiser_track2.png``). ``--only NAME,...`` restricts it to
some runs, so that each can be started in a CPU slot of its own.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from baselines.run_directory import atomic_write_json
from benchmark.figures import new_figure, save_figure
from benchmark.threshold import THRESHOLD_KEY, threshold_from
from experiments.dp_scale_report import (
    NO_PRIVACY,
    DPScaleRun,
    dp_scale_table,
    plot_dp_scale,
    plot_round_curves,
    read_dp_scale_run,
)
from experiments.fsp_report import fsp_table, read_fsp_run
from experiments.personal_report import (
    SCORES,
    PersonalReport,
    per_client_csv,
    plot_per_client,
    read_personal,
)
from experiments.personal_report import markdown_table as personal_table
from experiments.pflkit_command import checkpoint_scores, run_pflkit
from experiments.report import RunReport, format_bytes, markdown_table, plot_anls_vs_bytes, read_run
from experiments.round_scores import (
    RoundScore,
    first_at_threshold,
    read_round_scores,
    train_round_by_round,
)

EPSILONS = (1, 4, 8)
DP_METHODS = ("dp-fedavg", "dp-lora")


@dataclass(frozen=True)
class Experiment:
    """One ``pflkit train`` run: its directory name, preset and extra options."""

    name: str
    preset: str
    options: tuple[str, ...] = ()


TRACK1 = tuple(Experiment(name, name) for name in ("fedavg", "lora", "lora-1client", "lora-nf4"))
#: What the ``lora`` preset's choices are worth on ``mini`` (docs/results/track1-baselines.md), all
#: over FedAvg's 10 rounds: the winner's targets (rank 6 on q and v), the preset's adapters at
#: half its rounds, feed-forward layers only, and a rank-32 probe of the capacity that closes
#: the gap at 10 rounds.
TRACK1_PROBES = (
    Experiment(
        "lora-qv-r6",
        "lora",
        ("--rounds", "10", "--lora-rank", "6", "--lora-targets", "q,v", "--lr", "1e-3"),
    ),
    Experiment("lora-10rounds", "lora", ("--rounds", "10")),
    Experiment(
        "lora-ffn-r4", "lora", ("--rounds", "10", "--lora-rank", "4", "--lora-targets", "wi,wo")
    ),
    Experiment("lora-r32", "lora", ("--rounds", "10", "--lora-rank", "32", "--lr", "1e-3")),
)
TRACK2 = tuple(
    Experiment(f"{method}-eps{epsilon}", method, ("--epsilon", str(epsilon)))
    for method in DP_METHODS
    for epsilon in EPSILONS
)


#: Issue 15, track 1: the runner-up's optimiser against the baseline, each checkpoint scored on
#: val and test after every round (:mod:`experiments.round_scores`), 10 rounds each; FedShampoo
#: at its first lr 5e-3 and at the preset's 2e-2.
OPTIMISER_TRACK1 = (
    Experiment("fedavg", "fedavg"),
    Experiment("fedshampoo-lr5e-3", "fedshampoo", ("--lr", "5e-3")),
    Experiment("fedshampoo-lr2e-2", "fedshampoo", ("--lr", "2e-2")),
)
OPTIMISER_ROUNDS = 10
#: Issue 15, track 2: DP-CLGECL with its momentum SGD, and with AdamW at dp-fedavg's lr; beside
#: ``dp-fedavg`` (:data:`TRACK2`). Row name -> (preset, options).
CLGECL_ROWS: dict[str, tuple[str, tuple[str, ...]]] = {
    "dp-clgecl": ("dp-clgecl", ()),
    "dp-clgecl-adamw": ("dp-clgecl", ("--optimizer", "adamw", "--lr", "2e-4")),
}
CLGECL_TRACK2 = tuple(
    Experiment(f"{row}-eps{epsilon}", preset, (*options, "--epsilon", str(epsilon)))
    for row, (preset, options) in CLGECL_ROWS.items()
    for epsilon in EPSILONS
)


#: Issue 15, the 1,000x search: track-1 recipes whose whole log stays under a thousandth of
#: ``fedavg``'s 306,649,600 bytes (10 rounds x 2 clients x 2 directions x 7,666,240): LoRA
#: adapters alone (no fully trained module) on every linear layer, NF4 on the wire, several local
#: epochs per visit. Rank 1 sends 16,896 values a message, rank 2 33,792.
_ADAPTERS_ONLY = ("--lora-targets", "q,k,v,o,wi,wo", "--fully-trained", "none")
RECIPES = (
    Experiment(
        "recipe-r1-nf4-7x2-e4",
        "lora-nf4",
        (
            *_ADAPTERS_ONLY,
            "--lora-rank",
            "1",
            "--rounds",
            "7",
            "--clients-per-round",
            "2",
            "--local-epochs",
            "4",
        ),
    ),
    Experiment(
        "recipe-r2-nf4-4x2-e4",
        "lora-nf4",
        (
            *_ADAPTERS_ONLY,
            "--lora-rank",
            "2",
            "--rounds",
            "4",
            "--clients-per-round",
            "2",
            "--local-epochs",
            "4",
        ),
    ),
    #: every client's data in one round (190,080 bytes): coverage instead of rounds
    Experiment(
        "recipe-r1-nf4-1x10-e4",
        "lora-nf4",
        (
            *_ADAPTERS_ONLY,
            "--lora-rank",
            "1",
            "--rounds",
            "1",
            "--clients-per-round",
            "10",
            "--local-epochs",
            "4",
        ),
    ),
)


#: The pilot study's server settings (section 5.2): FedAdam at eta_s 1e-3 and epsilon (the kit's
#: tau) 1e-5; FedAvgM with momentum 0.9 as an exponential average, m_t = 0.9 m_{t-1} + 0.1
#: Delta_t, which is the kit's v_t = 0.9 v_{t-1} + Delta_t at server lr 0.1.
FEDADAM = ("--server-lr", "1e-3", "--tau", "1e-5")
FEDAVGM = ("--server-lr", "0.1", "--server-momentum", "0.9")
#: FedAvgM while pre-training, FedAvg while fine-tuning (the pilot's protocol).
FSP_FEDAVGM = ("--fsp-strategy", "fedavgm", "--fsp-server-lr", "0.1", "--server-momentum", "0.9")
#: Issue 16: FSP on and off at equal fine-tuning rounds (the ``fedavg`` preset's 10), then the
#: runs the findings rest on (FedAvg with and without FSP, FSP with FedAvgM) at training seed 1.
FSP = (
    Experiment("fedavg", "fedavg"),
    Experiment("fedadam", "fedavg", ("--strategy", "fedadam", *FEDADAM)),
    Experiment("fedavgm", "fedavg", ("--strategy", "fedavgm", *FEDAVGM)),
    Experiment("fsp-fedavg", "fsp-fedavg"),
    Experiment("fsp-fedadam", "fsp-fedadam"),
    Experiment("fsp-fedavgm", "fsp-fedavg", FSP_FEDAVGM),
    *(
        Experiment(f"fsp-{objective}", "fsp-fedavg", ("--fsp-objectives", objective))
        for objective in ("tm", "lm", "tlm")
    ),
    *(
        Experiment(f"{name}-seed1", preset, (*options, "--seed", "1"))
        for name, preset, options in (
            ("fedavg", "fedavg", ()),
            ("fsp-fedavg", "fsp-fedavg", ()),
            ("fsp-fedavgm", "fsp-fedavg", FSP_FEDAVGM),
        )
    ),
)


#: Issue 17: the competition's DP presets on the ``dp`` scale at epsilon 1/4/8 over two seeds,
#: then non-private ``fedavg`` over the DP baseline's 5 rounds on the clients' whole data, then
#: each DP preset of seed 0 without clipping or noise (sigma 1e-9 at S = 1000: no update is
#: clipped and the noise's standard deviation is 1e-6). The order is the table's priority: a
#: session that runs out of time has the private runs first. Seed 1 skips the per-round
#: validation (the table scores every checkpoint on the whole val split).
DP_SCALE_PRESETS = ("dp-fedavg-competition", "dp-lora-competition")
DP_SCALE_SEEDS = (0, 1)
_NO_PRIVACY_OPTIONS = ("--noise-multiplier", "1e-9", "--clipping-norm", "1000")


@dataclass(frozen=True)
class DPScaleExperiment(Experiment):
    """A run of :data:`DP_SCALE` with the table's labels: its budget (``eps1``, ``noprivacy``,
    ``""`` for a non-DP run) and training seed."""

    budget: str = ""
    seed: int = 0


def _dp_scale_run(
    preset: str, budget: str, options: tuple[str, ...], seed: int
) -> DPScaleExperiment:
    quiet = ("--val-limit", "0") if seed else ()
    return DPScaleExperiment(
        f"{preset}-{budget}-seed{seed}",
        preset,
        (*options, "--seed", str(seed), *quiet),
        budget,
        seed,
    )


DP_SCALE = (
    *(
        _dp_scale_run(preset, f"eps{epsilon}", ("--epsilon", str(epsilon)), seed)
        for seed in DP_SCALE_SEEDS
        for epsilon in (8, 1, 4)
        for preset in DP_SCALE_PRESETS
    ),
    DPScaleExperiment("fedavg-seed0", "fedavg", ("--rounds", "5", "--val-limit", "0")),
    *(_dp_scale_run(preset, NO_PRIVACY, _NO_PRIVACY_OPTIONS, 0) for preset in DP_SCALE_PRESETS),
)


TRACK3 = (
    Experiment("track3-fedavg-ft-seed0", "fedavg-ft"),
    Experiment("track3-local-only-seed0", "local-only"),
    *(Experiment(f"track3-{preset}-seed0", preset) for preset in ("pfedcr", "fedp3", "feddat")),
    #: LoRA FedAvg with FedDAT's shared adapter and rounds: "parameter-efficient FedAvg".
    Experiment("track3-lora-10rounds-seed0", "lora", ("--rounds", "10")),
)


def run_experiment(
    experiment: Experiment,
    data: Path,
    out: Path,
    base: str,
    val_limit: int,
    extra: Sequence[str] = (),
) -> Path:
    """Train (or resume, or keep) one run and score its checkpoint on the whole val split.

    Raises:
        RuntimeError: when training or scoring fails (with the command's last output).
    """
    run = out / experiment.name
    if not (run / "submission.json").is_file():
        resume = ("--resume",) if (run / "config.json").is_file() else ()
        trained = run_pflkit(
            "train",
            "--method",
            experiment.preset,
            "--data",
            str(data),
            "--out",
            str(run),
            "--base",
            base,
            "--val-limit",
            str(val_limit),
            "--threads",
            "1",
            "--no-progress",
            *experiment.options,
            *extra,
            *resume,
        )
        if trained.returncode != 0:
            raise RuntimeError(f"{experiment.name}: training failed:\n{trained.stderr[-2000:]}")
    score_split(str(run / "checkpoint"), data, run / "val.json")
    print(f"done: {experiment.name}", flush=True)
    return run


def score_split(checkpoint: str, data: Path, target: Path, split: str = "val") -> float:
    """The checkpoint's ANLS on the whole ``split``, kept in ``target``
    (``pflkit evaluate --json``'s output, written through a staging file; an existing
    ``target`` is read).

    Raises:
        RuntimeError: when scoring fails (with the command's last output).
    """
    if not target.is_file():
        atomic_write_json(target, checkpoint_scores(checkpoint, data, split))
    return float(json.loads(target.read_text(encoding="utf-8"))["anls"])


def full_val_report(run: Path) -> RunReport:
    """The run's figures with the val ANLS of the whole split."""
    anls = json.loads((run / "val.json").read_text(encoding="utf-8"))["anls"]
    return dataclasses.replace(read_run(run), val_anls=anls)


def track2_table(out: Path, fedavg: RunReport | None, methods: Sequence[str] = DP_METHODS) -> str:
    """Markdown: one row per DP method, one column per epsilon, FedAvg as the non-private row."""
    header = "| method | " + " | ".join(f"epsilon {e}" for e in EPSILONS) + " | non-private |"
    lines = [header, "| --- |" + " ---: |" * (len(EPSILONS) + 1)]
    for method in methods:
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


def plot_anls_vs_epsilon(
    out: Path, fedavg: RunReport | None, target: Path, methods: Sequence[str] = DP_METHODS
) -> Path:
    """Val ANLS against epsilon, one line per DP method, FedAvg as a horizontal line."""
    figure, axes = new_figure()
    for method in methods:
        points = [
            (e, full_val_report(out / f"{method}-eps{e}").val_anls)
            for e in EPSILONS
            if (out / f"{method}-eps{e}" / "val.json").is_file()
        ]
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


def optimiser_track1(
    out: Path, stated_threshold: float | None = None
) -> tuple[str, dict[str, list[RoundScore]]]:
    """Markdown: the round-by-round runs, each with its rounds and bytes to the threshold that
    the ``fedavg`` run's final test ANLS implies (95% of it), or to ``stated_threshold`` (the
    benchmark's) when ``fedavg`` was not run here."""
    scores = {e.name: read_round_scores(out / e.name) for e in OPTIMISER_TRACK1}
    fedavg = scores["fedavg"]
    threshold = threshold_from(fedavg[-1].test_anls) if fedavg else stated_threshold
    source = (
        "95% of fedavg's test ANLS after its last round"
        if fedavg
        else "the benchmark's, from benchmark.json"
    )
    lines = [
        f"threshold: {threshold} ({source})\n",
        "| run | val ANLS per round (whole split) | final val | final test | "
        "bytes/message | total bytes | round at threshold | bytes to threshold |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, rows in scores.items():
        if not rows:
            continue
        report = read_run(out / name)
        reached = None if threshold is None else first_at_threshold(rows, threshold)
        at = (
            ("not reached", "n/a")
            if reached is None
            else (str(reached.round), format_bytes(reached.total_bytes))
        )
        curve = ", ".join(_anls(row.val_anls) for row in rows)
        lines.append(
            f"| {name} | {curve} | {_anls(rows[-1].val_anls)} | {rows[-1].test_anls:.4f} | "
            f"{report.bytes_per_message:,} | {format_bytes(rows[-1].total_bytes)} | "
            f"{at[0]} | {at[1]} |"
        )
    return "\n".join(lines) + "\n", scores


def _anls(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def plot_round_scores(
    scores: dict[str, list[RoundScore]], target: Path, threshold: float | None = None
) -> Path:
    """Val (solid) and test (dashed) ANLS against cumulative bytes, the threshold as a line
    (``fedavg``'s when it is among the runs, else ``threshold``)."""
    figure, axes = new_figure()
    for name, rows in scores.items():
        if not rows:
            continue
        val = [(row.total_bytes, row.val_anls) for row in rows if row.val_anls is not None]
        (line,) = axes.plot(*zip(*val, strict=True), marker="o", label=f"{name} val")
        axes.plot(
            [row.total_bytes for row in rows],
            [row.test_anls for row in rows],
            linestyle="--",
            marker=".",
            color=line.get_color(),
            label=f"{name} test",
        )
    if scores.get("fedavg"):
        threshold = threshold_from(scores["fedavg"][-1].test_anls)
    if threshold is not None:
        axes.axhline(threshold, color="grey", linestyle=":", label="track-1 threshold")
    axes.set_xlabel("bytes exchanged (both directions), one point per round")
    axes.set_ylabel("ANLS (whole split)")
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize="small")
    return save_figure(figure, target)


def recipes_table(out: Path, threshold: float | None) -> str:
    """Markdown: each finished :data:`RECIPES` run, its bytes and scores against the threshold."""
    lines = [
        f"threshold: {threshold} (the benchmark's)\n",
        "| recipe | options | bytes/message | total bytes | val ANLS | test ANLS | "
        "reaches the threshold |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for experiment in RECIPES:
        run = out / experiment.name
        if not (run / "test.json").is_file():
            continue
        report = full_val_report(run)
        test = json.loads((run / "test.json").read_text(encoding="utf-8"))["anls"]
        reached = "n/a" if threshold is None else ("yes" if test >= threshold else "no")
        lines.append(
            f"| {experiment.name} | `{' '.join(experiment.options)}` | "
            f"{report.bytes_per_message:,} | {report.total_bytes:,} | "
            f"{report.val_anls:.4f} | {test:.4f} | {reached} |"
        )
    return "\n".join(lines) + "\n"


def verify_privacy(run: Path) -> dict:
    """``pflkit dp verify`` on the run's ``privacy.json``, kept in ``RUN/verify.json``.

    Raises:
        RuntimeError: when the declaration does not verify.
    """
    target = run / "verify.json"
    if not target.is_file():
        checked = run_pflkit("dp", "verify", str(run / "privacy.json"), "--json")
        if checked.returncode != 0:
            raise RuntimeError(
                f"{run.name}: privacy.json does not verify:\n"
                f"{checked.stdout[-2000:]}{checked.stderr[-2000:]}"
            )
        staging = target.with_suffix(".json.tmp")
        staging.write_text(checked.stdout, encoding="utf-8")
        staging.replace(target)
    return json.loads(target.read_text(encoding="utf-8"))


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
    recipe_table = recipes_table(args.out, threshold)
    (args.out / "optimiser_recipes.md").write_text(recipe_table, encoding="utf-8")
    print(recipe_table)
    table, scores = optimiser_track1(args.out, threshold)
    (args.out / "optimiser_track1.md").write_text(table, encoding="utf-8")
    plot_round_scores(scores, args.out / "optimiser_track1.png", threshold)
    print(table)
    methods = ("dp-fedavg", *CLGECL_ROWS)
    for experiment in track2:
        verify_privacy(args.out / experiment.name)
    fedavg = read_round_scores(args.out / "fedavg")
    fedavg_report = (
        dataclasses.replace(read_run(args.out / "fedavg"), val_anls=fedavg[-1].val_anls)
        if fedavg
        else None
    )
    table2 = track2_table(args.out, fedavg_report, methods)
    (args.out / "optimiser_track2.md").write_text(table2, encoding="utf-8")
    plot_anls_vs_epsilon(args.out, fedavg_report, args.out / "optimiser_track2.png", methods)
    print(table2)


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
    atomic_write_json(
        target,
        checkpoint_scores(checkpoint, data, "test", "--personal", str(directory / "personal")),
    )
    return target


def track3(data: Path, out: Path, base: str) -> list[PersonalReport]:
    """Score base, fedavg (global only, from ``fedavg-ft``) and every trained track-3 run on
    the personal test splits; runs not (yet) trained are left out."""
    score_personal(out / "track3-base-seed0", base, data)
    reports = [read_personal(out / "track3-base-seed0")]
    fedavg_ft = out / TRACK3[0].name
    if (fedavg_ft / "submission.json").is_file():
        score_personal(out / "track3-fedavg-seed0", str(fedavg_ft / "checkpoint"), data)
        submission = json.loads((fedavg_ft / "submission.json").read_text(encoding="utf-8"))
        with (fedavg_ft / "communication_log.csv").open(encoding="utf-8") as stream:
            federated = sum(
                int(row["amount_of_bytes"])
                for row in csv.DictReader(stream)
                if int(row["federated_round"]) <= submission["rounds"]
            )
        timing = submission["timing"]
        reports.append(
            read_personal(
                out / "track3-fedavg-seed0",
                total_bytes=federated,
                wall_seconds=timing["wall"] - timing.get("personalisation", 0.0),
            )
        )
    for run in (out / experiment.name for experiment in TRACK3):
        if (run / "submission.json").is_file():
            score_personal(run, str(run / "checkpoint"), data)
            reports.append(read_personal(run))
    return reports


def short_name(experiment: Experiment) -> str:
    """A track-3 run's name without ``track3-`` and ``-seed0`` (``lora-10rounds``)."""
    return experiment.name.removeprefix("track3-").removesuffix("-seed0")


def selected(experiments: Sequence[Experiment], only: str | None) -> tuple[Experiment, ...]:
    """The experiments named in ``only`` (comma-separated short names; ``None``: all).

    Raises:
        ValueError: for a name that is no experiment of the track.
    """
    if only is None:
        return tuple(experiments)
    names = {name.strip() for name in only.split(",") if name.strip()}
    known = {short_name(e) for e in experiments}
    if names - known:
        raise ValueError(
            f"--only {sorted(names - known)}: no such experiment; choose from {sorted(known)}"
        )
    return tuple(e for e in experiments if short_name(e) in names)


def run_selected(
    experiments: Sequence[Experiment], args: argparse.Namespace, parser: argparse.ArgumentParser
) -> None:
    """Train (or keep) the experiments ``--only`` names, ``--parallel`` at a time."""
    try:
        chosen = selected(experiments, args.only)
    except ValueError as error:
        parser.error(str(error))
    args.out.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=args.parallel) as pool:
        list(
            pool.map(
                lambda e: run_experiment(e, args.data, args.out, args.base, args.val_limit), chosen
            )
        )


def fsp_experiments(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Issue 16: train (or keep) the selected :data:`FSP` runs, then tabulate every finished one."""
    run_selected(FSP, args, parser)
    rows = [
        read_fsp_run(args.out / e.name) for e in FSP if (args.out / e.name / "val.json").is_file()
    ]
    (args.out / "fsp.md").write_text(fsp_table(rows), encoding="utf-8")
    print(fsp_table(rows))


def dp_scale_experiments(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Issue 17: train (or keep) the selected :data:`DP_SCALE` runs, verify every declaration,
    score the base, then tabulate and plot every finished run."""
    run_selected(DP_SCALE, args, parser)
    base_anls = score_split(args.base, args.data, args.out / "base" / "val.json")
    runs: list[DPScaleRun] = []
    for experiment in DP_SCALE:
        run = args.out / experiment.name
        if not (run / "val.json").is_file():
            continue
        if experiment.budget.startswith("eps"):
            verify_privacy(run)
        runs.append(read_dp_scale_run(run, experiment.preset, experiment.budget, experiment.seed))
    runs.sort(key=lambda r: (r.preset != "fedavg", r.preset, r.budget or "z", r.seed))
    table = dp_scale_table(runs, base_anls, DP_SCALE_SEEDS)
    (args.out / "dp_scale.md").write_text(table, encoding="utf-8")
    plot_dp_scale(runs, base_anls, args.out / "dp_scale.png")
    plot_round_curves([r for r in runs if r.seed == 0], base_anls, args.out / "dp_scale_rounds.png")
    print(table)


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
    if args.track == "optimiser":
        optimiser_experiments(args)
        return
    if args.track == "fsp":
        fsp_experiments(args, parser)
        return
    if args.track == "dp-scale":
        dp_scale_experiments(args, parser)
        return
    if args.track == "3":
        run_selected(TRACK3, args, parser)
        reports = track3(args.data, args.out, args.base)
        (args.out / "track3.md").write_text(personal_table(reports), encoding="utf-8")
        plot_per_client(reports, args.out / "track3.png")
        (args.out / "track3_clients.csv").write_text(per_client_csv(reports), encoding="utf-8")
        print(personal_table(reports))
        return
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
    (args.out / "track1.md").write_text(markdown_table(reports), encoding="utf-8")
    plot_anls_vs_bytes(reports, args.out / "track1.png")
    print(markdown_table(reports))
    if args.track != "1":
        (args.out / "track2.md").write_text(track2_table(args.out, fedavg), encoding="utf-8")
        plot_anls_vs_epsilon(args.out, fedavg, args.out / "track2.png")
        print(track2_table(args.out, fedavg))


if __name__ == "__main__":
    main()
