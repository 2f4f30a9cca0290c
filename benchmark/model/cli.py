"""`pflkit model`: model checkpoint tools (wired in pflkit/cli.py)."""

from __future__ import annotations

import math

import click

from benchmark.model.random_init import SHAPES


@click.group()
def model() -> None:
    """Model checkpoint tools."""


@model.command()
@click.argument("source", type=click.Path(exists=True, file_okay=False))
@click.argument("target", type=click.Path())
@click.option(
    "--visual",
    "visual_dir",
    type=click.Path(exists=True, file_okay=False),
    default=None,
    help="The DiT directory the public code loaded (config.json, preprocessor_config.json), "
    "e.g. a local copy of microsoft/dit-base-finetuned-rvlcdip. Without it the image encoder's "
    "flags are read off the checkpoint's tensors.",
)
@click.option(
    "--box-scale",
    type=click.FloatRange(min=0, min_open=True),
    default=1.0,
    show_default=True,
    help="Box scaling the checkpoint was trained with (the public code: 1, no rescaling).",
)
def convert(source: str, target: str, visual_dir: str | None, box_scale: float) -> None:
    """Turn a public VT5 checkpoint directory SOURCE (e.g. rubentito/vt5-base-spdocvqa) into a
    kit checkpoint directory TARGET.

    SOURCE holds the T5 config.json, pytorch_model.bin (read with torch.load(weights_only=True):
    only for the organisers' own trusted files) or model.safetensors, and spiece.model. The
    settings of the public pipeline (lower-cased words, bilinear page resize, 19 answer tokens,
    box scale 1) are recorded in TARGET's config.json.
    """
    from benchmark.model.checkpoint_validation import CheckpointError
    from benchmark.model.conversion import convert_public_checkpoint

    try:
        report = convert_public_checkpoint(
            source, target, visual_dir=visual_dir, box_scale=box_scale
        )
    except (CheckpointError, FileExistsError) as error:
        raise click.ClickException(str(error)) from error
    click.echo(f"converted {source} -> {target}")
    for line in report.lines():
        click.echo(f"  {line}")


@model.command()
@click.option("--shape", type=click.Choice(SHAPES), default="vt5-base", show_default=True,
              help="vt5-base: the public model's shape (T5-base + DiT-base, 336,142,080 "
              "parameters, lm_head apart from shared); tiny: the kit's CPU shape.")
@click.option("--out", "out", type=click.Path(), required=True,
              help="The checkpoint directory to write (must not exist).")
@click.option("--seed", type=int, default=0, show_default=True, help="Initialisation seed.")
def init(shape: str, out: str, seed: int) -> None:
    """Write a randomly initialised VT5 of a real shape, with the shipped tokenizer: real-size
    training, scoring and memory checks without downloading any weights."""
    from benchmark.model.checkpoint import expected_tensor_spec, read_checkpoint_config
    from benchmark.model.random_init import init_checkpoint

    try:
        directory = init_checkpoint(shape, out, seed=seed)
    except FileExistsError as error:
        raise click.ClickException(str(error)) from error
    config = read_checkpoint_config(directory)
    values = sum(math.prod(dims) for dims, _ in expected_tensor_spec(config).values())
    click.echo(f"wrote {directory}: {shape} VT5, {values:,} parameters, "
               f"tie_lm_head={config.tie_lm_head}, seed {seed}")
