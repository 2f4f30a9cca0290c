"""`pflkit pretrain`: pre-train the tiny VT5 base model, or another family's tiny shape, on the
public corpus (wired by pflkit/cli.py)."""

from __future__ import annotations

from pathlib import Path

import click

from benchmark.model.families import DEFAULT_FAMILY, FAMILIES


@click.command()
@click.option("--data", "data_dir", type=click.Path(path_type=Path, file_okay=False), required=True,
              help="A generated benchmark directory (its public/ corpus is used) or a public corpus.")
@click.option("--out", "run_dir", type=click.Path(path_type=Path, file_okay=False), required=True,
              help="Run directory: checkpoints, learning curve; an existing run is resumed.")
@click.option("--family", default=DEFAULT_FAMILY, show_default=True,
              type=click.Choice(sorted(FAMILIES)),
              help="vt5: the shipped base's recipe (benchmark/pretraining/recipe.py); another "
              "family: question answering on the public corpus from its random tiny shape with "
              "the shipped tokenizer (benchmark/pretraining/family_qa.py).")
@click.option("--steps", type=click.IntRange(min=1), default=None,
              help="Another family only: optimiser steps of the run's schedule (default: "
              "1000 for a new run, a resumed run's own). VT5's recipe fixes its own.")
@click.option("--max-steps", type=int, default=None,
              help="Stop after this many steps in total (default: the whole recipe).")
@click.option("--threads", type=int, default=1, show_default=True,
              help="torch CPU threads (1 is fastest for the tiny model on a shared machine).")
@click.option("--ship", is_flag=True,
              help="Install the run's latest checkpoint as the shipped `base` model and exit "
              "(VT5 only: the shipped base is VT5).")
def pretrain(data_dir: Path, run_dir: Path, family: str, steps: int | None,
             max_steps: int | None, threads: int, ship: bool) -> None:  # fmt: skip
    """Pre-train (or resume pre-training) a tiny base model on the public corpus only.

    Never reads PFL data: only DIR/public (held-out public documents measure reading skill).
    """
    import json

    import torch

    from benchmark.model.loading import BASE_MODEL_DIR
    from benchmark.pretraining.family_recipe import run_family
    from benchmark.pretraining.recipe import TINY_RECIPE
    from benchmark.pretraining.shipping import ship as ship_checkpoint
    from benchmark.pretraining.trainer import latest_checkpoint

    try:
        started = run_family(run_dir)
    except ValueError as error:
        raise click.ClickException(str(error)) from error
    if started is not None and started != family:
        raise click.ClickException(
            f"{run_dir}: a {started} run; resume it with --family {started} or pass a new --out"
        )
    if family != DEFAULT_FAMILY and ship:
        raise click.UsageError("--ship installs the shipped base, which is VT5; another family's "
                               "checkpoint is used as it is (pflkit train --base DIR)")  # fmt: skip
    if family == DEFAULT_FAMILY and steps is not None:
        raise click.UsageError("--steps is for another family; VT5's recipe fixes its own steps "
                               "(stop earlier with --max-steps)")  # fmt: skip
    if ship:
        checkpoint = latest_checkpoint(run_dir)
        if checkpoint is None:
            raise click.ClickException(f"{run_dir}: no complete checkpoint to ship yet")
        ship_checkpoint(checkpoint, BASE_MODEL_DIR)
        click.echo(f"shipped {checkpoint} as the base model in {BASE_MODEL_DIR}")
        return
    public_dir = data_dir / "public" if (data_dir / "public").is_dir() else data_dir
    if not (public_dir / "imdb_train.npy").is_file():
        raise click.ClickException(
            f"{public_dir}: no imdb_train.npy; pass a directory written by `pflkit data generate`"
        )
    torch.set_num_threads(threads)
    if family != DEFAULT_FAMILY:
        result = _pretrain_family(public_dir, run_dir, family, steps, max_steps)
        click.echo(json.dumps(result, indent=2))
        return
    from benchmark.pretraining.run import open_run
    from benchmark.pretraining.trainer import pretrain as run_pretraining

    model, processor, training, validation = open_run(public_dir, run_dir, TINY_RECIPE)
    result = run_pretraining(model, processor, training, validation, run_dir, TINY_RECIPE,
                             max_steps=max_steps)
    click.echo(json.dumps(result, indent=2))


def _pretrain_family(public_dir: Path, run_dir: Path, family: str, steps: int | None,
                     max_steps: int | None) -> dict:  # fmt: skip
    """Run (or resume) a family's question-answering pre-training and plot its curve into the
    run directory (``learning_curve.png``); the last curve point."""
    from benchmark.pretraining.curve import plot_family_curve, read_curve
    from benchmark.pretraining.family_qa import open_family_run, pretrain_family
    from benchmark.pretraining.family_recipe import resumed_recipe

    try:
        recipe = resumed_recipe(run_dir, family, steps=steps)
        model, processor, training, validation = open_family_run(public_dir, run_dir, recipe)
    except ValueError as error:
        raise click.ClickException(str(error)) from error
    result = pretrain_family(model, processor, training, validation, run_dir, recipe,
                             max_steps=max_steps)  # fmt: skip
    plot_family_curve(read_curve(run_dir), run_dir / "learning_curve.png",
                      title=f"{family}, {recipe.shape}, random start")  # fmt: skip
    return result
