"""`pflkit evaluate`: score a checkpoint on a benchmark split; `pflkit data threshold`: score the
organisers' FedAvg run and store track 1's threshold (both wired in pflkit/cli.py)."""

from __future__ import annotations

import json

import click


@click.command()
@click.argument("checkpoint")
@click.option(
    "--data",
    "data_dir",
    required=True,
    type=click.Path(exists=True, file_okay=False),
    help="Data directory (real release or `pflkit data generate` output).",
)
@click.option(
    "--split", type=click.Choice(["val", "test"]), default="val", show_default=True
)
@click.option(
    "--images-dir",
    type=click.Path(exists=True, file_okay=False),
    default=None,
    help="Page images, when not in images/ next to the split.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (anls, accuracy, n, ...).")
@click.option(
    "--predictions",
    "predictions_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write per-question predictions here as JSON lines.",
)
@click.option("--batch-size", type=click.IntRange(min=1), default=64, show_default=True)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Score the first N questions.")
@click.option(
    "--max-answer-tokens",
    type=click.IntRange(min=1),
    default=None,
    help="Bound on generated answer tokens (default: the checkpoint's).",
)
@click.option("--device", default="auto", show_default=True,
              help="auto (CUDA when present, else CPU), cpu, cuda or cuda:N.")
@click.option("--precision", type=click.Choice(["fp32", "bf16"]), default="fp32",
              show_default=True, help="bf16: autocast on the forward passes (not bit-compatible).")
@click.option(
    "--personal",
    "personal_dir",
    type=click.Path(exists=True, file_okay=False),
    default=None,
    help="Track 3: a personal/ directory (client_{k}.safetensors); score each client's "
    "personalised model on its personal questions and the global model on unseen providers.",
)
def evaluate(
    checkpoint: str,
    data_dir: str,
    split: str,
    images_dir: str | None,
    as_json: bool,
    predictions_path: str | None,
    batch_size: int,
    limit: int | None,
    max_answer_tokens: int | None,
    device: str,
    precision: str,
    personal_dir: str | None,
) -> None:
    """Print ANLS and accuracy of CHECKPOINT (a directory, or `base`) on a split.

    Test scores are also broken down into in- and out-of-distribution questions. With
    --personal, print the track-3 figures instead: per-client personalised and global ANLS,
    their weighted mean, spread and worst client, and the global unseen-provider ANLS.
    """
    from transformers.utils import logging as hf_logging

    from benchmark.evaluation.loop import default_cache_dir
    from benchmark.evaluation.loop import evaluate as run_evaluation

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    from benchmark.model.device import resolve_device

    try:
        torch_device = resolve_device(device)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--device") from None
    model, processor, dataset = load_for_scoring(checkpoint, data_dir, split, images_dir)
    model.to(torch_device)
    if personal_dir is not None:
        if limit is not None or predictions_path is not None:
            raise click.BadParameter("--personal scores whole personal splits: drop --limit and "
                                     "--predictions", param_hint="--personal")
        result = _score_personal(model, processor, dataset, data_dir, split, personal_dir,
                                 batch_size=batch_size, max_new_tokens=max_answer_tokens,
                                 precision=precision)
        if as_json:
            click.echo(json.dumps({"checkpoint": checkpoint, "split": split,
                                   "personal": personal_dir, **result.summary()}))
        else:
            _print_personal(result, checkpoint, split)
        return
    if limit is not None:
        dataset = dataset.select(range(min(limit, len(dataset))))
    try:
        result = run_evaluation(
            model,
            processor,
            dataset,
            batch_size=batch_size,
            progress=True,
            max_new_tokens=max_answer_tokens,
            cache_dir=default_cache_dir(),
            precision=precision,
        )
    except FileNotFoundError as error:
        raise click.ClickException(str(error)) from None
    if predictions_path:
        result.write_predictions(predictions_path)
    if as_json:
        click.echo(json.dumps({"checkpoint": checkpoint, "split": split, **result.summary()}))
        return
    _print_result(result, checkpoint, split)
    if predictions_path:
        click.echo(f"predictions: {predictions_path}")


def load_for_scoring(checkpoint: str, data_dir: str, split: str,
                     images_dir: str | None = None) -> tuple:
    """Model, processor and split to score; a bad checkpoint or data directory is a CLI error."""
    from benchmark.data import load_split
    from benchmark.data.errors import DataError
    from benchmark.model import CheckpointError, load_model, load_processor

    try:
        return (load_model(checkpoint), load_processor(checkpoint),
                load_split(data_dir, split, images_dir=images_dir))
    except (CheckpointError, FileNotFoundError, DataError) as error:
        raise click.ClickException(str(error)) from None


def _score_personal(model, processor, dataset, data_dir: str, split: str, personal_dir: str,
                    **options):
    """Track-3 figures of a checkpoint and its personalisations; bad input is a CLI error."""
    from benchmark.data import DataError, personal_splits
    from benchmark.evaluation.loop import default_cache_dir
    from benchmark.evaluation.personal import evaluate_personalised
    from benchmark.model import CheckpointError, expected_tensor_spec, read_personalisations

    try:
        splits = personal_splits(data_dir, split)
        personal = read_personalisations(personal_dir, expected_tensor_spec(model.config),
                                         splits.num_clients)
        return evaluate_personalised(model, processor, dataset, splits, personal.load,
                                     cache_dir=default_cache_dir(), **options)
    except (CheckpointError, DataError, ValueError) as error:
        raise click.ClickException(str(error)) from None


def _print_personal(result, checkpoint: str, split: str) -> None:
    """Human-readable track-3 figures."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{checkpoint} personalised on {split}: {result.n} personal questions, "
                        f"{result.unseen_n} of unseen providers, {result.seconds:.0f} s")
    for column in ("client", "n", "personalised ANLS", "global ANLS", "personalisation"):
        table.add_column(column, justify="left" if column == "client" else "right")
    for score in result.clients:
        table.add_row(str(score.client), str(score.n), _figure(score.personal_anls),
                      _figure(score.global_anls), "yes" if score.personalised else "empty")
    table.add_row("mean (by questions)", str(result.n), f"{result.personal_anls:.4f}",
                  f"{result.global_personal_anls:.4f}", "", end_section=True)
    Console().print(table)
    Console().print(
        f"personalised ANLS {result.personal_anls:.4f} ± {result.personal_anls_std:.4f} "
        f"(std across clients), worst client {result.worst_client} "
        f"{result.worst_anls:.4f}; global model on unseen providers {_figure(result.unseen_anls)}"
    )


def _figure(value: float | None) -> str:
    """A score to 4 decimals, or a dash for none."""
    return "-" if value is None else f"{value:.4f}"


def _print_result(result, checkpoint: str, split: str) -> None:
    """Human-readable scores."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{checkpoint} on {split}: {result.n} questions, "
                        f"{result.questions_per_second:.1f} questions/s")
    table.add_column("questions")
    table.add_column("n", justify="right")
    table.add_column("ANLS", justify="right")
    table.add_column("accuracy", justify="right")
    table.add_row("all", str(result.n), f"{result.anls:.4f}", f"{result.accuracy:.4f}")
    for name, group in result.by_distribution.items():
        table.add_row(f"{name}-distribution", str(group.n), f"{group.anls:.4f}", f"{group.accuracy:.4f}")
    for name, group in result.by_question_type.items():
        table.add_row(f"  {name}", str(group.n), f"{group.anls:.4f}", f"{group.accuracy:.4f}")
    Console().print(table)


@click.command()
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
