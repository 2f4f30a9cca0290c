"""What verification by reproduction costs, and how far apart honest re-runs land.

For each preset: train it at its full length on a benchmark with one torch thread (the
participant's run, timed), then re-run its recipe with ``pflkit reproduce``'s code in the
sandbox, once on the same thread count (it must be *reproduced exactly*; the cost is its time
over the training's) and once with ``--other-threads`` (float arithmetic in another order: the
distance between the models over the re-run's change from the base is the figure the tolerance
is derived from). One JSON line per preset is appended to ``--out``.

Usage::

    python -m bench.reproduction --data .bench/mini --presets fedavg dp-lora \\
        --out docs/results/reproduction.jsonl
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: options a preset needs beyond its own to train (a DP preset's noise)
EXTRA = {"dp-lora": ("--noise-multiplier", "1.0"), "dp-fedavg": ("--noise-multiplier", "1.0")}


def train(preset: str, data: Path, out: Path) -> float:
    """``pflkit train`` of the preset at its full length, one thread; its wall seconds."""
    command = [sys.executable, "-m", "pflkit.cli", "train", "--preset", preset, "--data",
               str(data), "--out", str(out), "--threads", "1", "--no-progress",
               *EXTRA.get(preset, ())]  # fmt: skip
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - started


def measure(preset: str, data: Path, other_threads: int) -> dict[str, Any]:
    """Train, re-run on one thread and on ``other_threads``; the figures."""
    from evaluator.reproduction.rerun import reproduce_run_directory

    with tempfile.TemporaryDirectory(prefix="reproduction-bench-") as root:
        run = Path(root) / preset
        training = train(preset, data, run)
        same = reproduce_run_directory(run, data)
        other = reproduce_run_directory(run, data, threads=other_threads)
    row = {
        "preset": preset,
        "training_seconds": round(training, 1),
        "same_threads": {"verdict": same.verdict.outcome, "seconds": round(same.seconds, 1),
                         "cost_over_training": round(same.seconds / training, 3)},
        "other_threads": {"threads": other_threads, "verdict": other.verdict.outcome,
                          "seconds": round(other.seconds, 1),
                          **{k: other.verdict.figures.get(k) for k in ("apart", "moved", "ratio")},
                          "first_difference": other.verdict.where},
    }  # fmt: skip
    return row


def main(argv: list[str] | None = None) -> None:
    """Measure each preset and append its line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--presets", nargs="+", default=["fedavg", "dp-lora"])
    parser.add_argument("--other-threads", type=int, default=2)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    import torch

    for preset in args.presets:
        row = measure(preset, args.data, args.other_threads)
        row.update(date=dt.date.today().isoformat(), machine=platform.processor() or
                   platform.machine(), torch=torch.__version__,
                   data=args.data.name)  # fmt: skip
        print(json.dumps(row), flush=True)
        with args.out.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
