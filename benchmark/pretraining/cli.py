"""`pflkit pretrain`: pre-train the tiny VT5 base model on the public corpus (wired by pflkit/cli.py)."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.option("--data", "data_dir", type=click.Path(path_type=Path, file_okay=False), required=True,
              help="A generated benchmark directory (its public/ corpus is used) or a public corpus.")
@click.option("--out", "run_dir", type=click.Path(path_type=Path, file_okay=False), required=True,
              help="Run directory: checkpoints, learning curve; an existing run is resumed.")
@click.option("--max-steps", type=int, default=None,
              help="Stop after this many steps in total (default: the whole recipe).")
@click.option("--threads", type=int, default=1, show_default=True,
              help="torch CPU threads (1 is fastest for the tiny model on a shared machine).")
@click.option("--ship", is_flag=True,
              help="Install the run's latest checkpoint as the shipped `base` model and exit.")
def pretrain(data_dir: Path, run_dir: Path, max_steps: int | None, threads: int, ship: bool) -> None:
    """Pre-train (or resume pre-training) the tiny VT5 base model on the public corpus only.

    Never reads PFL data: only DIR/public (held-out public documents measure reading skill).
    """
    import json

    import torch

    from benchmark.model.loading import BASE_MODEL_DIR
    from benchmark.pretraining.recipe import TINY_RECIPE
    from benchmark.pretraining.shipping import ship as ship_checkpoint
    from benchmark.pretraining.trainer import latest_checkpoint

    if ship:
        checkpoint = latest_checkpoint(run_dir)
        if checkpoint is None:
            raise click.ClickException(f"{run_dir}: no complete checkpoint to ship yet")
        ship_checkpoint(checkpoint, BASE_MODEL_DIR)
        click.echo(f"shipped {checkpoint} as the base model in {BASE_MODEL_DIR}")
        return
    from benchmark.pretraining.run import open_run
    from benchmark.pretraining.trainer import pretrain as run_pretraining

    public_dir = data_dir / "public" if (data_dir / "public").is_dir() else data_dir
    if not (public_dir / "imdb_train.npy").is_file():
        raise click.ClickException(
            f"{public_dir}: no imdb_train.npy; pass a directory written by `pflkit data generate`"
        )
    torch.set_num_threads(threads)
    model, processor, training, validation = open_run(public_dir, run_dir, TINY_RECIPE)
    result = run_pretraining(model, processor, training, validation, run_dir, TINY_RECIPE,
                             max_steps=max_steps)
    click.echo(json.dumps(result, indent=2))
