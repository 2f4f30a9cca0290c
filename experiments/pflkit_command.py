"""``pflkit`` as a child process, the way the experiment scripts run the kit: each training or
scoring in a process of its own, so one that fails or leaks memory leaves the sweep standing, and
its output is read from ``--json``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def run_pflkit(*args: str, threads: int | None = None) -> subprocess.CompletedProcess:
    """``python -m pflkit ARGS`` with its output captured (not checked: the caller reports).

    Args:
        args: the subcommand and its options.
        threads: OpenMP threads of the child (``None``: the environment's), for timings that
            compare.
    """
    env = None if threads is None else {**os.environ, "OMP_NUM_THREADS": str(threads)}
    return subprocess.run(
        [sys.executable, "-m", "pflkit", *args],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )


def checkpoint_scores(
    checkpoint: str | Path, data: str | Path, split: str, *options: str
) -> dict[str, Any]:
    """``pflkit evaluate --json``'s summary of the checkpoint on the whole ``split`` of ``data``.

    Args:
        checkpoint: a checkpoint directory, or ``base``.
        data: a benchmark directory.
        split: the split scored.
        options: more ``pflkit evaluate`` options (``--personal DIR``).

    Raises:
        RuntimeError: when scoring fails (with the command's last output).
    """
    scored = run_pflkit(
        "evaluate", str(checkpoint), "--data", str(data), "--split", split, *options, "--json"
    )
    if scored.returncode != 0:
        raise RuntimeError(
            f"{checkpoint}: scoring failed ({split} split):\n{scored.stderr[-2000:]}"
        )
    return json.loads(scored.stdout.strip().splitlines()[-1])


def checkpoint_anls(checkpoint: str | Path, data: str | Path, split: str) -> float:
    """The checkpoint's ANLS on the whole ``split`` of ``data``.

    Raises:
        RuntimeError: when scoring fails (with the command's last output).
    """
    return float(checkpoint_scores(checkpoint, data, split)["anls"])
