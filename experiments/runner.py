"""Running the experiments: one ``pflkit train`` process per run (resumed when interrupted, kept
when finished), ``--parallel`` at a time, each final checkpoint scored on the whole val split."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from experiments.catalog import Experiment, selected
from experiments.pflkit_command import run_pflkit
from experiments.scoring import score_split


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
