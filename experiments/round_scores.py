"""A run's checkpoint after every round, scored on the whole val and test splits.

The track-1 question "how many rounds and bytes to the threshold" needs the test ANLS after each
round, and a run keeps only its last checkpoint. So the run is trained one round at a time
(``pflkit train --rounds r --resume`` for r = 1..R: a non-private run resumes exactly, so the
checkpoints are those of one R-round run; a private one's noise depends on R and is refused) and
each round's checkpoint is scored with ``pflkit evaluate``. ``RUN/rounds/{r}.json`` keeps
``{"round", "total_bytes", "val_anls", "test_anls"}``; a finished round is kept, so an
interrupted sweep goes on where it stopped.

A run trained in one process can be scored afterwards from snapshots of its global weights
(``RUN/snapshots/round-NNNN.safetensors``, copies of ``state/round-NNNN/global.safetensors``
taken while it trains): :func:`score_snapshot` applies them to the base and scores the result,
with the bytes of the communication log up to that round.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from baselines.run_directory import atomic_write_json
from experiments.pflkit_command import checkpoint_anls, run_pflkit

ROUNDS_DIR = "rounds"


@dataclass(frozen=True)
class RoundScore:
    """The global model after one round: bytes sent so far and its ANLS on both splits."""

    round: int
    total_bytes: int
    val_anls: float | None
    test_anls: float


def train_round_by_round(
    run: Path, preset: str, rounds: int, data: Path, base: str, options: Sequence[str] = ()
) -> list[RoundScore]:
    """Train ``preset`` for ``rounds`` rounds, scoring the checkpoint after each.

    Raises:
        RuntimeError: when a training or scoring command fails (with its last output).
    """
    for round_ in range(1, rounds + 1):
        target = run / ROUNDS_DIR / f"{round_}.json"
        if target.is_file():
            continue
        resume = ("--resume",) if (run / "config.json").is_file() else ()
        trained = run_pflkit(
            "train",
            "--method",
            preset,
            "--data",
            str(data),
            "--out",
            str(run),
            "--base",
            base,
            "--threads",
            "1",
            "--no-progress",
            "--val-limit",
            "0",
            *options,
            "--rounds",
            str(round_),
            *resume,
        )
        if trained.returncode != 0:
            raise RuntimeError(f"{run.name}: round {round_} failed:\n{trained.stderr[-2000:]}")
        submission = json.loads((run / "submission.json").read_text(encoding="utf-8"))
        atomic_write_json(
            target,
            {
                "round": round_,
                "total_bytes": submission["total_bytes"],
                "val_anls": checkpoint_anls(run / "checkpoint", data, "val"),
                "test_anls": checkpoint_anls(run / "checkpoint", data, "test"),
            },
        )
        print(f"{run.name}: round {round_} scored", flush=True)
    return read_round_scores(run)


def read_round_scores(run: Path) -> list[RoundScore]:
    """The scored rounds of a run, in order (empty when none was scored)."""
    directory = run / ROUNDS_DIR
    if not directory.is_dir():
        return []
    scores = [
        RoundScore(**json.loads(path.read_text(encoding="utf-8")))
        for path in directory.glob("*.json")
    ]
    return sorted(scores, key=lambda score: score.round)


def first_at_threshold(scores: Sequence[RoundScore], threshold: float) -> RoundScore | None:
    """The first round whose test ANLS reaches the threshold (``None``: none does)."""
    return next((score for score in scores if score.test_anls >= threshold), None)


def bytes_through(run: Path, round_: int) -> int:
    """Bytes of every message of rounds 1..``round_`` in the run's communication log."""
    with (run / "communication_log.csv").open(encoding="utf-8") as stream:
        return sum(
            int(row["amount_of_bytes"])
            for row in csv.DictReader(stream)
            if int(row["federated_round"]) <= round_
        )


def snapshot_checkpoint(run: Path, round_: int, base: str) -> Path:
    """``RUN/rounds/checkpoint-N``: the base with the snapshot of round N's global weights."""
    from safetensors.torch import load_file

    from benchmark.model import load_model, load_processor, save_checkpoint

    target = run / ROUNDS_DIR / f"checkpoint-{round_}"
    if (target / "config.json").is_file():
        return target
    weights = load_file(run / "snapshots" / f"round-{round_:04d}.safetensors")
    model = load_model(base)
    missing = set(weights) - set(model.state_dict())
    if missing:
        raise ValueError(
            f"{run.name}: snapshot of round {round_} names unknown tensors {sorted(missing)[:3]}"
        )
    model.load_state_dict(weights, strict=False)
    target.parent.mkdir(exist_ok=True)
    return save_checkpoint(model, load_processor(base), target)


def score_snapshot(
    run: Path, round_: int, data: Path, base: str, splits: Sequence[str] = ("test", "val")
) -> RoundScore:
    """Score round N's snapshot on ``splits`` (test always) and keep it in ``RUN/rounds/N.json``.

    Raises:
        RuntimeError: when scoring fails.
    """
    target = run / ROUNDS_DIR / f"{round_}.json"
    if target.is_file():
        kept = RoundScore(**json.loads(target.read_text(encoding="utf-8")))
        if kept.val_anls is not None or "val" not in splits:
            return kept
    checkpoint = snapshot_checkpoint(run, round_, base)
    score = RoundScore(
        round_,
        bytes_through(run, round_),
        checkpoint_anls(checkpoint, data, "val") if "val" in splits else None,
        checkpoint_anls(checkpoint, data, "test"),
    )
    atomic_write_json(target, score.__dict__)
    return score
