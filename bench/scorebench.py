"""Time to score one submission: ``python -m bench.scorebench --data DIR --model DIR``.

Runs what a worker runs on one checkpoint, without the database: checkpoint validation (header,
names/shapes/dtypes, finite values), building the model from the reference configuration, and
the evaluation loop on the hidden test split, and prints the time of each step. The settings are
the worker's (``evaluator.cli.service_settings``: the command line over ``PFLKIT_EVALUATOR_*``),
and so is the scorer (``Scorer.from_settings``). The test split and processor are loaded first
and timed apart (a worker loads them once at start-up).
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import click

from evaluator.cli import _DATA, service_settings


@click.command()
@_DATA
@click.option(
    "--model",
    "reference_model",
    default="base",
    show_default=True,
    help="reference model directory (or base)",
)
@click.option(
    "--checkpoint",
    type=click.Path(exists=True, path_type=Path),
    default=None,
    help="submitted model.safetensors (default: the reference's own weights)",
)
@click.option("--batch-size", default=32, show_default=True)
@click.option("--threads", "torch_threads", default=0, show_default=True,
              help="torch threads (0: default)")  # fmt: skip
@click.option("--device", default=None, help="auto (default), cpu, cuda or cuda:N")
def main(checkpoint: Path | None, **options: object) -> None:
    """Time the validation and scoring of one checkpoint."""
    settings = service_settings(options, scores=True)
    if settings.torch_threads:
        import torch

        torch.set_num_threads(settings.torch_threads)
    from evaluator.scoring import Scorer
    from evaluator.validation.checkpoint import validate_checkpoint

    timings: dict[str, float] = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pflkit-scorebench-") as cache:
        scorer = Scorer.from_settings(settings, cache_root=Path(cache))
        scorer.prepare()
        timings["worker_start_up_s"] = time.perf_counter() - started
        checkpoint = checkpoint or scorer.reference_dir / "model.safetensors"
        started = time.perf_counter()
        header = validate_checkpoint(
            checkpoint,
            scorer.expected_spec,
            max_header_bytes=settings.max_header_bytes,
            max_tensors=settings.max_tensors,
        )
        timings["validation_s"] = time.perf_counter() - started
        started = time.perf_counter()
        scores = scorer.score(checkpoint)
        timings["model_and_evaluation_s"] = time.perf_counter() - started
    timings["evaluation_loop_s"] = scores.seconds
    result = {
        "questions": scores.n,
        "parameters": header.parameters,
        "checkpoint_bytes": checkpoint.stat().st_size,
        **{key: round(value, 2) for key, value in timings.items()},
        "score_one_submission_s": round(
            timings["validation_s"] + timings["model_and_evaluation_s"], 2
        ),
        "questions_per_second": round(scores.n / scores.seconds, 1),
        "anls": round(scores.anls, 4),
    }
    click.echo(json.dumps(result))


if __name__ == "__main__":
    main()
