"""Compare finished runs: a results table and a plot of validation ANLS against bytes sent."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmark.figures import new_figure, save_figure
from experiments.results_file import Column, Table, command_line, number, text

#: Track 1's table: one row per run (:func:`runs_table`).
RUN_COLUMNS: tuple[Column, ...] = (
    text("run", "run"),
    text("method", "method"),
    number("rounds", "rounds", "int"),
    number("clients_per_round", "clients/round", "int"),
    number("val_anls", "val ANLS"),
    text("bytes_per_message", "bytes/message", align="right"),
    text("total_bytes", "total bytes", align="right"),
    text("wall", "wall", align="right"),
    number("overhead", "overhead", ".3f"),
)


@dataclass(frozen=True)
class RunReport:
    """The figures of one finished run.

    Attributes:
        name: the run directory's name.
        method: the preset.
        rounds: federated rounds.
        clients_per_round: M.
        val_anls: validation ANLS after the last round (``None`` when not evaluated).
        bytes_per_message: ``amount_of_bytes`` of one message.
        total_bytes: all messages.
        wall_seconds: wall time of the rounds.
        overhead: wall time / time spent in client training.
        curve: (cumulative bytes, val ANLS) after each evaluated round.
    """

    name: str
    method: str
    rounds: int
    clients_per_round: int
    val_anls: float | None
    bytes_per_message: int
    total_bytes: int
    wall_seconds: float
    overhead: float
    curve: tuple[tuple[int, float], ...]


def read_run(run_dir: str | Path) -> RunReport:
    """Read ``submission.json`` and ``metrics.jsonl`` of a finished run.

    Args:
        run_dir: the run directory.

    Returns:
        The run's figures.

    Raises:
        FileNotFoundError: when the run has no ``submission.json`` (not finished).
    """
    path = Path(run_dir)
    submission_path = path / "submission.json"
    if not submission_path.is_file():
        raise FileNotFoundError(f"{submission_path} does not exist: the run has not finished")
    submission = json.loads(submission_path.read_text(encoding="utf-8"))
    metrics = [
        json.loads(line)
        for line in (path / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    timing = submission["timing"]
    per_message = submission["bytes_per_message"]
    return RunReport(
        name=path.name,
        method=submission["method"],
        rounds=submission["rounds"],
        clients_per_round=submission["clients_per_round"],
        val_anls=submission.get("val_anls"),
        bytes_per_message=per_message if isinstance(per_message, int) else max(per_message),
        total_bytes=submission["total_bytes"],
        wall_seconds=timing["wall"],
        overhead=timing["wall"] / max(timing["client_training"], 1e-9),
        curve=tuple((row["total_bytes"], row["val_anls"]) for row in metrics if "val_anls" in row),
    )


def format_bytes(count: float) -> str:
    """A byte count with its unit (B, kB, MB, GB: powers of 1000)."""
    for unit in ("B", "kB", "MB", "GB"):
        if count < 1000 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.2f} {unit}"
        count /= 1000
    raise AssertionError


def runs_table(reports: Sequence[RunReport]) -> Table:
    """Method, rounds, M, val ANLS, bytes per message, total, wall time and overhead per run."""
    rows = [
        {
            "run": r.name,
            "method": r.method,
            "rounds": r.rounds,
            "clients_per_round": r.clients_per_round,
            "val_anls": "n/a" if r.val_anls is None else r.val_anls,
            "bytes_per_message": format_bytes(r.bytes_per_message),
            "total_bytes": format_bytes(r.total_bytes),
            "wall": f"{r.wall_seconds:.0f} s",
            "overhead": r.overhead,
        }
        for r in reports
    ]
    return Table(RUN_COLUMNS, rows)


def plot_anls_vs_bytes(reports: Sequence[RunReport], out: str | Path) -> Path:
    """Plot validation ANLS against cumulative bytes (log scale), one line per run.

    Args:
        reports: the runs.
        out: the image file to write (PNG).

    Returns:
        The written path.
    """
    figure, axes = new_figure()
    for report in reports:
        if report.curve:
            xs, ys = zip(*report.curve, strict=True)
            axes.plot(xs, ys, marker="o", label=report.name)
    axes.set_xscale("log")
    axes.set_xlabel("bytes exchanged (both directions)")
    axes.set_ylabel("validation ANLS")
    axes.grid(True, alpha=0.3)
    if any(report.curve for report in reports):
        axes.legend()
    return save_figure(figure, out)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m experiments.report RUN_DIR... --out FILE [--plot FILE]``: write the table's
    data file and the plot."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m experiments.report", description=main.__doc__)
    parser.add_argument("run_dirs", nargs="+", help="finished run directories")
    parser.add_argument("--out", required=True, help="the table's data file (.json) to write")
    parser.add_argument("--plot", help="write a PNG of validation ANLS against bytes")
    args = parser.parse_args(argv)
    reports = [read_run(run_dir) for run_dir in args.run_dirs]
    command = command_line("experiments.report", sys.argv[1:] if argv is None else argv)
    print(f"table: {runs_table(reports).write(args.out, command=command)}")
    if args.plot:
        print(f"plot: {plot_anls_vs_bytes(reports, args.plot)}")


if __name__ == "__main__":
    main()
