"""Time to score one submission: ``python -m bench.scorebench --data DIR --model DIR``.

Runs what a worker runs on one checkpoint, without the database: checkpoint validation (header,
names/shapes/dtypes, finite values), building the model from the reference configuration, and
the evaluation loop on the hidden test split, and prints the time of each step. The test split
and processor are loaded first and timed apart (a worker loads them once at start-up).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import click


@click.command()
@click.option(
    "--data",
    "data_dir",
    required=True,
    type=click.Path(exists=True, path_type=Path),
    help="benchmark directory with evaluator/imdb_test.npy",
)
@click.option(
    "--model",
    "reference",
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
@click.option("--threads", default=0, show_default=True, help="torch threads (0: default)")
def main(
    data_dir: Path, reference: str, checkpoint: Path | None, batch_size: int, threads: int
) -> None:
    """Time the validation and scoring of one checkpoint."""
    if threads:
        import torch

        torch.set_num_threads(threads)
    from evaluator.scoring import Scorer
    from evaluator.validation.checkpoint import validate_checkpoint

    timings: dict[str, float] = {}
    started = time.perf_counter()
    scorer = Scorer(data_dir, reference_model=reference, batch_size=batch_size)
    scorer.prepare()
    timings["worker_start_up_s"] = time.perf_counter() - started
    checkpoint = checkpoint or scorer.reference_dir / "model.safetensors"
    started = time.perf_counter()
    header = validate_checkpoint(
        checkpoint, scorer.expected_spec, max_header_bytes=16 * 2**20, max_tensors=100_000
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
