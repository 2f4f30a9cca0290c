"""What verification by reproduction costs, and how far apart honest re-runs land.

For each preset: train it at its full length on a benchmark with one torch thread (the
participant's run, timed), then re-run its recipe with ``pflkit reproduce``'s code in the
sandbox, once on the same thread count (it must be *reproduced exactly*; the cost is its time
over the training's) and once with ``--other-threads`` (float arithmetic in another order: the
distance between the models over the re-run's change from the base is the figure the tolerance
is derived from). One JSON line per preset is appended to ``--out``.

``--record PATH`` then writes the results table of every line of ``--out`` (one row each,
:func:`table_columns`) as that data file (``docs/results/data/reproduction.json``), dated and
placed by the lines; ``--record-only`` writes it from the lines already there, measuring nothing.

Usage::

    python -m bench.reproduction --data .bench/mini --presets fedavg dp-lora \\
        --out docs/results/reproduction.jsonl --record docs/results/data/reproduction.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from experiments.results_file import (
    Column,
    command_line,
    machine_description,
    number,
    text,
    write_results_table,
)

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


def short_exponent(value: float | None) -> str:
    """A figure in scientific notation as the tables write it: ``4.6e-5`` (empty for None)."""
    if value is None:
        return ""
    mantissa, exponent = f"{value:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def preset_title(preset: str) -> str:
    """A preset as the tables name it: code, with the noise it trains at (``(sigma 1)``)."""
    noise = dict(zip(EXTRA.get(preset, ())[::2], EXTRA.get(preset, ())[1::2], strict=True))
    sigma = noise.get("--noise-multiplier")
    return f"`{preset}`" + ("" if sigma is None else f" (sigma {float(sigma):g})")


def preset_rounds(preset: str) -> int:
    """The rounds of a preset at its full length (what the bench trains)."""
    from baselines.presets import all_presets

    return int(all_presets()[preset]["rounds"])


def table_columns(other_threads: int) -> tuple[Column, ...]:
    """The results table's columns (``docs/results/data/reproduction.json``) for re-runs on
    ``other_threads`` threads."""
    other = f"{other_threads} thread{'' if other_threads == 1 else 's'}"
    return (
        text("preset", "preset"),
        number("rounds", "rounds", "int"),
        text("training", "training", align="right"),
        text("re_run_1_thread", "re-run, 1 thread", align="right"),
        number("cost", "cost", ".2fx"),
        text("verdict", "verdict"),
        text(f"re_run_{other.replace(' ', '_')}", f"re-run, {other}", align="right"),
        text("distance_change", "distance / change", align="right"),
    )


def table(lines: list[dict[str, Any]]) -> tuple[tuple[Column, ...], list[dict[str, Any]]]:
    """The results table of the bench's lines: its columns and one row per line.

    Raises:
        ValueError: without lines, or for lines re-run on different thread counts.
    """
    threads = {line["other_threads"]["threads"] for line in lines}
    if len(threads) != 1:
        raise ValueError(f"one table needs one --other-threads, the lines have {sorted(threads)}")
    columns = table_columns(threads.pop())
    rows = []
    for line in lines:
        same, other = line["same_threads"], line["other_threads"]
        cells = (preset_title(line["preset"]), preset_rounds(line["preset"]),
                 f"{line['training_seconds']:.1f} s", f"{same['seconds']:.1f} s",
                 round(same["cost_over_training"], 2), same["verdict"],
                 f"{other['seconds']:.1f} s", short_exponent(other.get("ratio")))  # fmt: skip
        rows.append(dict(zip((column.key for column in columns), cells, strict=True)))
    return columns, rows


def measured_where(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """The provenance the lines give: the latest date, their machines and torch versions."""

    def joined(key: str) -> str:
        return "; ".join(dict.fromkeys(str(line[key]) for line in lines if line.get(key)))

    return {"date": max(line["date"] for line in lines), "machine": joined("machine"),
            "versions": {"torch": joined("torch")} if joined("torch") else {}}  # fmt: skip


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of a file the bench appends to."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def main(argv: list[str] | None = None) -> None:
    """Measure each preset and append its line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--presets", nargs="+", default=["fedavg", "dp-lora"])
    parser.add_argument("--other-threads", type=int, default=2)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--record", type=Path, default=None,
                        help="write the results table of every line of --out as this data file "
                             "(docs/results/data/NAME.json, shown by a results page)")
    parser.add_argument("--record-only", action="store_true",
                        help="measure nothing: write --record from the lines already in --out")
    args = parser.parse_args(argv)
    if args.record_only and args.record is None:
        parser.error("--record-only needs --record")
    if not args.record_only:
        if args.data is None:
            parser.error("--data is needed to measure")
        import torch

        for preset in args.presets:
            row = measure(preset, args.data, args.other_threads)
            row.update(date=dt.date.today().isoformat(), machine=machine_description(),
                       torch=torch.__version__, data=args.data.name)  # fmt: skip
            print(json.dumps(row), flush=True)
            with args.out.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(row) + "\n")
    if args.record is not None:
        lines = read_lines(args.out)
        columns, rows = table(lines)
        command = command_line("bench.reproduction", sys.argv[1:] if argv is None else argv)
        print(write_results_table(args.record, columns, rows, command=command,
                                  **measured_where(lines)))  # fmt: skip


if __name__ == "__main__":
    main()
