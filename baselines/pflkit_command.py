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


def run_pflkit(*args: str, threads: int | None = None) -> subprocess.CompletedProcess:
    """``python -m pflkit ARGS`` with its output captured (not checked: the caller reports).

    Args:
        args: the subcommand and its options.
        threads: OpenMP threads of the child (``None``: the environment's), for timings that
            compare.
    """
    env = None if threads is None else {**os.environ, "OMP_NUM_THREADS": str(threads)}
    return subprocess.run([sys.executable, "-m", "pflkit", *args], capture_output=True,
                          text=True, check=False, env=env)


def checkpoint_anls(checkpoint: str | Path, data: str | Path, split: str) -> float:
    """The checkpoint's ANLS on the whole ``split`` of ``data`` (``pflkit evaluate``).

    Raises:
        RuntimeError: when scoring fails (with the command's last output).
    """
    scored = run_pflkit("evaluate", str(checkpoint), "--data", str(data), "--split", split,
                        "--json")
    if scored.returncode != 0:
        raise RuntimeError(f"{checkpoint}: scoring on {split} failed:\n{scored.stderr[-2000:]}")
    return float(json.loads(scored.stdout.strip().splitlines()[-1])["anls"])
