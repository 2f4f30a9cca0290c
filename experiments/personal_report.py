"""Compare track-3 submissions: a results table and a per-client plot of personalised ANLS.

Each submission is a directory with ``personal_test.json`` (what ``pflkit evaluate CHECKPOINT
--split test --personal DIR --json`` prints: :meth:`PersonalisedResult.summary`) and, for a
trained run, ``submission.json`` (bytes, wall time).

``python -m experiments.personal_report DIR... --out FILE [--plot FILE] [--csv FILE]`` writes the
table's data file (:mod:`experiments.results_file`), the plot and the per-client scores behind it (the plot's data, kept beside it in
``docs/results/`` so a figure can be redrawn without the run directories).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.figures import new_figure, save_figure
from experiments.report import format_bytes
from experiments.results_file import Column, Table, code, command_line, number, text

SCORES = "personal_test.json"

#: The table's columns (:func:`personal_table`).
PERSONAL_COLUMNS: tuple[Column, ...] = (
    code("submission", "submission"),
    text("personalised", "personalised ANLS ± std", align="right"),
    text("worst_client", "worst client", align="right"),
    number("global_personal", "global ANLS (personal)"),
    number("global_unseen", "global ANLS (unseen)"),
    text("total_bytes", "total bytes", align="right"),
    text("wall", "wall", align="right"),
)


@dataclass(frozen=True)
class PersonalReport:
    """The track-3 figures of one submission.

    Attributes:
        name: the submission's name (its directory's, without ``track3-`` and ``-seed0``).
        scores: the summary of :func:`benchmark.evaluation.evaluate_personalised`.
        total_bytes: bytes of its communication log (0 without federation).
        wall_seconds: training wall time (``None``: nothing was trained).
    """

    name: str
    scores: dict[str, Any]
    total_bytes: int
    wall_seconds: float | None

    @property
    def personalised(self) -> bool:
        """Whether any client's personalisation changed a tensor."""
        return any(client["personalised"] for client in self.scores["clients"])


def read_personal(
    directory: str | Path, *, total_bytes: int | None = None, wall_seconds: float | None = None
) -> PersonalReport:
    """Read a submission's ``personal_test.json`` and, when present, ``submission.json``.

    Args:
        directory: holds ``personal_test.json``.
        total_bytes: the bytes to show (default: ``submission.json``'s, else 0).
        wall_seconds: the wall time to show (default: ``submission.json``'s, else none).

    Returns:
        The figures.

    Raises:
        FileNotFoundError: when ``personal_test.json`` is missing.
    """
    path = Path(directory)
    scores = json.loads((path / SCORES).read_text(encoding="utf-8"))
    submission_path = path / "submission.json"
    submission = (
        json.loads(submission_path.read_text(encoding="utf-8")) if submission_path.is_file() else {}
    )
    name = path.name.removeprefix("track3-").removesuffix("-seed0")
    if total_bytes is None:
        total_bytes = int(submission.get("total_bytes", 0))
    if wall_seconds is None:
        wall_seconds = submission.get("timing", {}).get("wall")
    return PersonalReport(name, scores, total_bytes, wall_seconds)


def personal_table(reports: Sequence[PersonalReport]) -> Table:
    """Personalised ANLS ± std, worst client, global ANLS on personal and unseen, bytes, wall."""
    rows = []
    for r in reports:
        s = r.scores
        rows.append(
            {
                "submission": r.name,
                "personalised": f"{s['personal_anls']:.4f} ± {s['personal_anls_std']:.4f}",
                "worst_client": f"{s['worst_anls']:.4f} (client {s['worst_client']})",
                "global_personal": s["global_personal_anls"],
                "global_unseen": s["unseen_anls"],
                "total_bytes": format_bytes(r.total_bytes) if r.total_bytes else "0",
                "wall": "-" if r.wall_seconds is None else f"{r.wall_seconds:.0f} s",
            }
        )
    return Table(PERSONAL_COLUMNS, rows)


def per_client_csv(reports: Sequence[PersonalReport]) -> str:
    """The plot's data: one row per client (its personal test questions), one column per
    submission with the ANLS its clients get (personalised where it has personalisations)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["client", "questions", *(r.name for r in reports)])
    clients = reports[0].scores["clients"] if reports else []
    for index, client in enumerate(clients):
        writer.writerow(
            [
                client["client"],
                client["n"],
                *(f"{r.scores['clients'][index]['personal_anls']:.4f}" for r in reports),
            ]
        )
    return out.getvalue()


def plot_per_client(reports: Sequence[PersonalReport], out: str | Path) -> Path:
    """Per-client ANLS on each client's personal test questions, one line per submission.

    A submission with personalisations is drawn solid (its clients' personalised models); one
    without is drawn dashed and labelled "global" (every client uses the global model).

    Args:
        reports: the submissions.
        out: the PNG to write.

    Returns:
        The written path.
    """
    figure, axes = new_figure()
    for report in reports:
        clients = [c for c in report.scores["clients"] if c["n"]]
        xs = [c["client"] for c in clients]
        ys = [c["personal_anls"] for c in clients]
        if report.personalised:
            axes.plot(xs, ys, marker="o", label=f"{report.name} (personalised)")
        else:
            axes.plot(xs, ys, marker="x", linestyle="--", label=f"{report.name} (global)")
    clients = [c for c in reports[0].scores["clients"] if c["n"]] if reports else []
    axes.set_xticks([c["client"] for c in clients], [f"{c['client']}\n({c['n']})" for c in clients])
    axes.set_xlabel("client (personal test questions)")
    axes.set_ylabel("ANLS on the client's personal test split")
    axes.grid(True, alpha=0.3)
    if reports:
        axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
        figure.set_figwidth(figure.get_figwidth() * 1.35)
    return save_figure(figure, out)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m experiments.personal_report DIR... --out FILE [--plot FILE] [--csv FILE]``: the
    table's data file, the plot and the per-client scores."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(
        prog="python -m experiments.personal_report", description=main.__doc__
    )
    parser.add_argument("dirs", nargs="+", help=f"directories holding {SCORES}")
    parser.add_argument("--out", required=True, help="the table's data file (.json) to write")
    parser.add_argument("--csv", help="write the per-client scores here")
    parser.add_argument("--plot", help="write the per-client PNG here")
    args = parser.parse_args(argv)
    reports = [read_personal(directory) for directory in args.dirs]
    command = command_line("experiments.personal_report", sys.argv[1:] if argv is None else argv)
    print(f"table: {personal_table(reports).write(args.out, command=command)}")
    if args.plot:
        print(f"plot: {plot_per_client(reports, args.plot)}")
    if args.csv:
        Path(args.csv).write_text(per_client_csv(reports), encoding="utf-8")
        print(f"per-client scores: {args.csv}")


if __name__ == "__main__":
    main()
