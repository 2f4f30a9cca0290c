"""The FSP table of docs/results/fsp-runs.md (``data/fsp.json``): each run's phases, val ANLS,
bytes and wall time.

A run directory of ``pflkit train`` holds ``submission.json`` (its ``pretraining`` when it
pre-trained), ``pretraining/submission.json`` (the phase's own bytes and time) and, from
``experiments.run``, ``val.json`` (the final checkpoint on the whole validation split).
Bytes are the whole log's (pre-training included, track 1's figure); wall time is both phases'.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from experiments.report import format_bytes
from experiments.results_file import Column, Table, number, text

#: The table's columns (:func:`fsp_table`).
FSP_COLUMNS: tuple[Column, ...] = (
    text("run", "run"),
    text("objectives", "FSP objectives"),
    text("fsp_server", "FSP server"),
    text("server", "fine-tuning server"),
    number("fsp_rounds", "FSP rounds", "int"),
    number("rounds", "fine-tuning rounds", "int"),
    number("val_anls", "val ANLS"),
    text("total_bytes", "total bytes", align="right"),
    text("fsp_bytes", "of which FSP", align="right"),
    text("wall", "wall", align="right"),
)


@dataclass(frozen=True)
class FspRow:
    """One run of the table.

    Attributes:
        name: the run directory's name.
        objectives: the pre-training objectives (empty: no pre-training).
        pretraining_strategy: the server strategy while pre-training (``None``: none).
        strategy: the fine-tuning server strategy.
        pretraining_rounds: P.
        rounds: fine-tuning rounds.
        val_anls: the final checkpoint on the whole validation split.
        total_bytes: every message of the log.
        pretraining_bytes: the pre-training rounds' share.
        wall_seconds: both phases' wall time.
    """

    name: str
    objectives: tuple[str, ...]
    pretraining_strategy: str | None
    strategy: str
    pretraining_rounds: int
    rounds: int
    val_anls: float
    total_bytes: int
    pretraining_bytes: int
    wall_seconds: float


def read_fsp_run(run: Path) -> FspRow:
    """The table's row of a finished, scored run (with or without pre-training).

    Raises:
        FileNotFoundError: when the run has not finished or not been scored.
    """
    for name in ("submission.json", "val.json"):
        if not (run / name).is_file():
            raise FileNotFoundError(f"{run} has no {name}: it has not finished or been scored")
    submission = json.loads((run / "submission.json").read_text(encoding="utf-8"))
    declared = submission.get("pretraining") or {}
    phase = {"total_bytes": 0, "timing": {"wall": 0.0}}
    if declared:
        phase = json.loads((run / "pretraining" / "submission.json").read_text(encoding="utf-8"))
    return FspRow(
        name=run.name,
        objectives=tuple(declared.get("objectives", ())),
        pretraining_strategy=declared.get("strategy"),
        strategy=submission["strategy"],
        pretraining_rounds=int(declared.get("rounds", 0)),
        rounds=int(submission["rounds"]),
        val_anls=float(json.loads((run / "val.json").read_text(encoding="utf-8"))["anls"]),
        total_bytes=int(submission["total_bytes"]),
        pretraining_bytes=int(phase["total_bytes"]),
        wall_seconds=float(submission["timing"]["wall"]) + float(phase["timing"]["wall"]),
    )


def fsp_table(rows: Sequence[FspRow]) -> Table:
    """One row per run, FSP's share of the bytes beside the total."""
    return Table(
        FSP_COLUMNS,
        [
            {
                "run": row.name,
                "objectives": "+".join(row.objectives) or "none",
                "fsp_server": row.pretraining_strategy or "-",
                "server": row.strategy,
                "fsp_rounds": row.pretraining_rounds,
                "rounds": row.rounds,
                "val_anls": row.val_anls,
                "total_bytes": format_bytes(row.total_bytes),
                "fsp_bytes": format_bytes(row.pretraining_bytes),
                "wall": f"{row.wall_seconds:.0f} s",
            }
            for row in rows
        ],
    )
