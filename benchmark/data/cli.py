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


@data.command()
@click.argument("data_dir", type=click.Path(exists=True, file_okay=False))
@click.option(
    "--run",
    "run_dir",
    required=True,
    type=click.Path(exists=True, file_okay=False),
    help="The organisers' finished `fedavg` run (its checkpoint/ is scored on test).",
)
@click.option("--batch-size", type=click.IntRange(min=1), default=64, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a sentence.")
def threshold(data_dir: str, run_dir: str, batch_size: int, as_json: bool) -> None:
    """Store the track-1 threshold (95% of the FedAvg run's test ANLS) in DIR/benchmark.json.

    Refused, with nothing written, when it is at or below the base model's own test ANLS."""
    import json
    from pathlib import Path

    from benchmark.evaluation.cli import load_for_scoring
    from benchmark.evaluation.loop import default_cache_dir, evaluate
    from benchmark.shipped import BASE_MODEL_DIR
    from benchmark.threshold import base_model_digest, threshold_from, write_threshold

    if not (Path(data_dir) / "benchmark.json").is_file():
        raise click.ClickException(
            f"{Path(data_dir) / 'benchmark.json'}: missing; the threshold is stored with a "
            "benchmark written by `pflkit data generate`"
        )
    run = Path(run_dir)
    submission_path = run / "submission.json"
    if not submission_path.is_file():
        raise click.ClickException(f"{submission_path}: missing; finish the fedavg run first")
    submission = json.loads(submission_path.read_text(encoding="utf-8"))
    if submission.get("method") != "fedavg":
        raise click.ClickException(
            f"{run}: method is {submission.get('method')!r}; the threshold is 95% of the "
            "organisers' `fedavg` baseline"
        )
    model, processor, dataset = load_for_scoring(str(run / "checkpoint"), data_dir, "test")
    result = evaluate(
        model, processor, dataset, batch_size=batch_size, cache_dir=default_cache_dir()
    )
    saved_config = run / "config.json"
    base = json.loads(saved_config.read_text())["base"] if saved_config.is_file() else "base"
    base_dir = BASE_MODEL_DIR if base == "base" else Path(base)
    # The base every run starts from must not reach the threshold: the untouched base with a
    # log of 1-byte messages would rank first in track 1.
    base_model, base_processor, base_dataset = load_for_scoring(str(base_dir), data_dir, "test")
    base_anls = evaluate(
        base_model,
        base_processor,
        base_dataset,
        batch_size=batch_size,
        cache_dir=default_cache_dir(),
    ).anls
    if threshold_from(result.anls) <= base_anls:
        raise click.ClickException(
            f"the threshold would be {threshold_from(result.anls):.4f} (95% of the fedavg run's "
            f"test ANLS {result.anls:.4f}), at or below the base model's own test ANLS "
            f"{base_anls:.4f} ({base_dir}): the untouched base would rank first in track 1. "
            "Train the organisers' fedavg baseline until it clearly beats the base (more "
            "rounds), then run this again; nothing was written"
        )
    provenance = {
        "run": str(run),
        "rounds": submission.get("rounds"),
        "base": base,
        "base_sha256": base_model_digest(base_dir),
        "base_test_anls": round(base_anls, 4),
    }
    value = write_threshold(data_dir, result.anls, provenance)
    if as_json:
        click.echo(
            json.dumps({"track1_threshold": value, "fedavg_test_anls": result.anls, "n": result.n})
        )
    else:
        click.echo(
            f"fedavg test ANLS {result.anls:.4f} on {result.n} questions: "
            f"track1_threshold {value:.4f} written to {Path(data_dir) / 'benchmark.json'}"
        )
