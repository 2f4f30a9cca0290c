"""`pflkit model`: model checkpoint tools (wired in pflkit/cli.py)."""

from __future__ import annotations

import math
from pathlib import Path

import click

from benchmark.model.families import DEFAULT_FAMILY, FAMILIES

#: Every family's shape names (VT5's `vt5-base` first, as before families).
SHAPES = tuple(dict.fromkeys(("vt5-base", "tiny", *(s for f in FAMILIES.values() for s in f.shapes))))


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
@click.option("--family", default=DEFAULT_FAMILY, show_default=True,
              type=click.Choice(sorted(FAMILIES)),
              help="The family of SOURCE: vt5 (the public VT5 code's layout) or another family "
              "in its hub layout (pix2struct: google/pix2struct-docvqa-base; idefics3: "
              "HuggingFaceTB/SmolVLM-256M-Instruct, with its own tokenizer).")
def convert(source: str, target: str, visual_dir: str | None, box_scale: float,
            family: str) -> None:  # fmt: skip
    """Turn a public checkpoint directory SOURCE into a kit checkpoint directory TARGET.

    VT5 (e.g. rubentito/vt5-base-spdocvqa): SOURCE holds the T5 config.json,
    pytorch_model.bin (read with torch.load(weights_only=True): only for the organisers' own
    trusted files) or model.safetensors, and spiece.model. The settings of the public pipeline
    (lower-cased words, bilinear page resize, 19 answer tokens, box scale 1) are recorded in
    TARGET's config.json. Another family: SOURCE is its hub layout (what save_pretrained
    writes), its input settings recorded in TARGET's config.json.
    """
    from benchmark.model.conversion import convert_public_checkpoint
    from benchmark.model.families import family_named
    from benchmark.model.safetensors_header import CheckpointError

    try:
        if family == DEFAULT_FAMILY:
            lines = convert_public_checkpoint(
                source, target, visual_dir=visual_dir, box_scale=box_scale
            ).lines()
        else:
            lines = family_named(family).convert_hub(Path(source), Path(target))
    except (CheckpointError, FileExistsError, NotImplementedError) as error:
        raise click.ClickException(str(error)) from error
    click.echo(f"converted {source} -> {target}")
    for line in lines:
        click.echo(f"  {line}")


@model.command()
@click.option("--family", default=DEFAULT_FAMILY, show_default=True,
              type=click.Choice(sorted(FAMILIES)),
              help="The model family (benchmark/model/families/): vt5 is the competition's.")
@click.option("--shape", type=click.Choice(SHAPES), default="base", show_default=True,
              help="base: the family's public checkpoint's shape (VT5: T5-base + DiT-base, "
              "336,142,080 parameters, lm_head apart from shared; `vt5-base` is the same); "
              "tiny: the kit's CPU shape.")
@click.option("--out", "out", type=click.Path(), required=True,
              help="The checkpoint directory to write (must not exist).")
@click.option("--seed", type=int, default=0, show_default=True, help="Initialisation seed.")
def init(family: str, shape: str, out: str, seed: int) -> None:
    """Write a randomly initialised model of a family's real shape, with the shipped tokenizer:
    real-size training, scoring and memory checks without downloading any weights."""
    from benchmark.model.families import family_named
    from benchmark.model.family_checkpoint import expected_tensor_spec, read_checkpoint_config
    from benchmark.model.random_init import init_checkpoint

    try:
        directory = init_checkpoint(shape, out, seed=seed, family=family)
    except (FileExistsError, ValueError) as error:
        raise click.ClickException(str(error)) from error
    config = read_checkpoint_config(directory)
    values = sum(math.prod(dims) for dims, _ in expected_tensor_spec(config).values())
    title = family_named(family).title
    tied = f", tie_lm_head={config.tie_lm_head}" if hasattr(config, "tie_lm_head") else ""
    click.echo(f"wrote {directory}: {shape} {title}, {values:,} parameters{tied}, seed {seed}")
