"""`pflkit data`: generate the synthetic benchmark and print data statistics."""

from __future__ import annotations

import click


@click.group()
def data() -> None:
    """Benchmark data: synthetic mini-PFL-DocVQA generator and statistics of a data directory."""


@data.command()
@click.option(
    "--out", "out", required=True, type=click.Path(file_okay=False), help="Directory to write."
)
@click.option(
    "--scale", type=click.Choice(["tiny", "mini", "full"]), default="mini", show_default=True
)
@click.option("--seed", type=int, default=0, show_default=True, help="Same seed, same bytes.")
@click.option(
    "--public-documents",
    type=click.IntRange(min=0),
    default=None,
    help="Size of the public pre-training corpus (default: the scale's).",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    help="Rendering processes (default: up to 4).",
)
@click.option("--overwrite", is_flag=True, help="Replace a non-empty --out directory.")
def generate(
    out: str,
    scale: str,
    seed: int,
    public_documents: int | None,
    workers: int | None,
    overwrite: bool,
) -> None:
    """Write DIR/participant, DIR/evaluator, DIR/public and DIR/benchmark.json."""
    import time

    from benchmark.data.errors import DataError
    from benchmark.data.synthetic import generate_benchmark

    start = time.perf_counter()
    try:
        summary = generate_benchmark(
            out,
            scale,
            seed,
            public_documents=public_documents,
            workers=workers,
            overwrite=overwrite,
        )
    except DataError as error:
        raise click.ClickException(str(error)) from error
    click.echo(
        f"wrote {out} ({summary['scale']}, seed {seed}) in {time.perf_counter() - start:.1f} s"
    )


@data.command()
@click.argument("data_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def stats(data_dir: str, as_json: bool) -> None:
    """Per-client providers, documents, pages and QA, plus val and test split into in/out."""
    import json

    from benchmark.data.errors import DataError
    from benchmark.data.stats import dataset_stats, stats_table

    try:
        rows = dataset_stats(data_dir)
    except DataError as error:
        raise click.ClickException(str(error)) from error
    if as_json:
        click.echo(json.dumps(rows, indent=1))
    else:
        from rich.console import Console

        Console().print(stats_table(rows))
