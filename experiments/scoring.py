"""Scoring the runs of the experiments, each result kept beside its run: the whole val or test
split (``pflkit evaluate``), the track-3 figures, a privacy declaration's check
(``pflkit dp verify``)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from baselines.run_directory import atomic_write_json
from experiments.personal_report import SCORES
from experiments.pflkit_command import checkpoint_scores, run_pflkit
from experiments.report import RunReport, read_run


def score_split(checkpoint: str, data: Path, target: Path, split: str = "val") -> float:
    """The checkpoint's ANLS on the whole ``split``, kept in ``target``
    (``pflkit evaluate --json``'s output, written through a staging file; an existing
    ``target`` is read).

    Raises:
        RuntimeError: when scoring fails (with the command's last output).
    """
    if not target.is_file():
        atomic_write_json(target, checkpoint_scores(checkpoint, data, split))
    return float(json.loads(target.read_text(encoding="utf-8"))["anls"])


def full_val_report(run: Path) -> RunReport:
    """The run's figures with the val ANLS of the whole split."""
    anls = json.loads((run / "val.json").read_text(encoding="utf-8"))["anls"]
    return dataclasses.replace(read_run(run), val_anls=anls)


def verify_privacy(run: Path) -> dict:
    """``pflkit dp verify`` on the run's ``privacy.json``, kept in ``RUN/verify.json``.

    Raises:
        RuntimeError: when the declaration does not verify.
    """
    target = run / "verify.json"
    if not target.is_file():
        checked = run_pflkit("dp", "verify", str(run / "privacy.json"), "--json")
        if checked.returncode != 0:
            raise RuntimeError(
                f"{run.name}: privacy.json does not verify:\n"
                f"{checked.stdout[-2000:]}{checked.stderr[-2000:]}"
            )
        staging = target.with_suffix(".json.tmp")
        staging.write_text(checked.stdout, encoding="utf-8")
        staging.replace(target)
    return json.loads(target.read_text(encoding="utf-8"))


def score_personal(directory: Path, checkpoint: str, data: Path) -> Path:
    """Track-3 scores of a checkpoint with ``directory/personal`` on the test split, kept in
    ``directory/personal_test.json`` (an empty ``personal/`` is written when there is none).

    Raises:
        RuntimeError: when scoring fails.
    """
    from benchmark.data import count_clients
    from benchmark.model import write_personalisations

    target = directory / SCORES
    if target.is_file():
        return target
    if not (directory / "personal").is_dir():
        write_personalisations(directory / "personal", {}, count_clients(data))
    atomic_write_json(
        target,
        checkpoint_scores(checkpoint, data, "test", "--personal", str(directory / "personal")),
    )
    return target
