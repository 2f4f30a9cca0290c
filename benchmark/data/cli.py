"""`pflkit data`: generate the synthetic benchmark and print data statistics (the group's
``threshold`` command scores a run: it is :mod:`benchmark.evaluation.cli`'s, added to the group by
``pflkit/cli.py``)."""

from __future__ import annotations

import click


@click.group()
def data() -> None:
    """Benchmark data: synthetic mini-PFL-DocVQA generator, statistics of a data directory and
    track 1's threshold."""


@data.command()
@click.option(
    "--out", "out", required=True, type=click.Path(file_okay=False), help="Directory to write."
)
@click.option(
    "--scale", type=click.Choice(["tiny", "mini", "dp", "full"]), default="mini", show_default=True
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
@click.option(
    "--canaries",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Canary providers for the evaluator's privacy audit (0: none); their secrets (coins "
    "or candidates, see --canary-kind) are kept in evaluator/ only.",
)
@click.option(
    "--canary-documents",
    type=click.IntRange(min=1),
    default=None,
    help="Training invoices of every canary provider (default: drawn like its client's "
    "ordinary providers'; a fixed count is a tell, for power studies).",
)
@click.option(
    "--canary-kind",
    type=click.Choice(["membership", "reconstruction"]),
    default="membership",
    show_default=True,
    help="membership: each canary joins on a secret coin; reconstruction: every canary joins "
    "with its VAT id and IBAN drawn from --canary-candidates secret candidates.",
)
@click.option(
    "--canary-candidates",
    type=click.IntRange(min=2),
    default=10,
    show_default=True,
    help="Candidate secrets of a reconstruction canary (k).",
)
def generate(
    out: str,
    scale: str,
    seed: int,
    public_documents: int | None,
    workers: int | None,
    overwrite: bool,
    canaries: int,
    canary_documents: int | None,
    canary_kind: str,
    canary_candidates: int,
) -> None:
    """Write DIR/participant, DIR/evaluator, DIR/public and DIR/benchmark.json (with
    --canaries M, also the audit's coins and probes under DIR/evaluator/)."""
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
            canaries=canaries,
            canary_documents=canary_documents,
            canary_kind=canary_kind,
            canary_candidates=canary_candidates,
        )
    except DataError as error:
        raise click.ClickException(str(error)) from error
    click.echo(
        f"wrote {out} ({summary['scale']}, seed {seed}) in {time.perf_counter() - start:.1f} s"
    )


@data.command("add-canaries")
@click.argument("src", type=click.Path(exists=True, file_okay=False))
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Directory to write.")
@click.option("--canaries", type=click.IntRange(min=1), required=True, help="M canary providers.")
@click.option("--kind", type=click.Choice(["membership", "reconstruction"]),
              default="membership", show_default=True,
              help="membership: each canary joins on a secret coin; reconstruction: every "
              "canary joins with its VAT id and IBAN one of --candidates secret candidates.")  # fmt: skip
@click.option("--candidates", type=click.IntRange(min=2), default=10, show_default=True,
              help="Candidate secrets of a reconstruction canary (k).")  # fmt: skip
@click.option("--documents", type=click.IntRange(min=1), default=None,
              help="Invoices of every canary (default: drawn from its client's providers' counts).")  # fmt: skip
@click.option("--seed", type=int, default=0, show_default=True, help="Same seed, same bytes.")
def add_canaries(
    src: str, out: str, canaries: int, kind: str, candidates: int, documents: int | None,
    seed: int,
) -> None:  # fmt: skip
    """Copy the data directory SRC (the real PFL-DocVQA layout or a generated one) to OUT with M
    canary providers added to the clients' training files; the coins, secrets and probes go
    to OUT/evaluator/ only."""
    import time

    from benchmark.data.add_canaries import add_canaries as add
    from benchmark.data.errors import DataError
    from benchmark.data.synthetic.canaries import CanarySpec

    start = time.perf_counter()
    try:
        summary = add(src, out, CanarySpec(canaries, kind, candidates, documents), seed=seed)
    except DataError as error:
        raise click.ClickException(str(error)) from error
    click.echo(
        f"wrote {out}: {summary['canaries']} {kind} canaries ({summary['included']} in training, "
        f"{summary['records_added']} records added, {summary['probes']} probes) in "
        f"{time.perf_counter() - start:.1f} s"
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
