"""A track-1 table's threshold columns recomputed at another threshold from the figures the table
holds: each run's test ANLS after every round (``test_anls_per_round``, the round-by-round table
of :func:`experiments.tables.optimiser_track1`) or its final test ANLS (``test_anls``, the 1,000x
search's :func:`experiments.tables.recipes_table`).

    python -m experiments.rethreshold docs/results/data/optimiser_track1.json --figure threshold

rewrites the file in place (``experiments.results_file``), the measured figures and provenance
unchanged: the rounds table's ``round_at_threshold`` and ``bytes_to_threshold`` (a round's
messages: ``--clients-per-round`` clients, both directions, each ``bytes_per_message``), the
search's ``reaches_threshold``, the note (``threshold: T (SOURCE)``), and this command appended to
the file's command.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from experiments.report import format_bytes
from experiments.results_file import Column, command_line, write_results_table
from experiments.round_scores import RoundScore, first_at_threshold

# a link that resolves from every folder of docs/ that shows these tables (results/, participants/)
SOURCE = "the threshold in force on mini, [Track 1: the threshold](../results/threshold.md)"
FIGURES = Path(__file__).resolve().parents[1] / "docs/results/data/reference_figures.json"


def reference_figure(name: str, path: Path = FIGURES) -> float:
    """A reference figure's value (a number)."""
    rows = json.loads(path.read_text(encoding="utf-8"))["rows"]
    return float(next(row["value"] for row in rows if row["name"] == name))


def rounds(row: dict[str, Any], clients_per_round: int) -> list[RoundScore]:
    """A rounds-table row's test ANLS per round, with the bytes sent through each round."""
    per_round = 2 * clients_per_round * row["bytes_per_message"]
    tests = [float(value) for value in row["test_anls_per_round"].split(", ")]
    return [
        RoundScore(round=index, total_bytes=index * per_round, val_anls=None, test_anls=test)
        for index, test in enumerate(tests, start=1)
    ]


def rethreshold(
    data: dict[str, Any], threshold: float, clients_per_round: int = 2, shown: str | None = None
) -> dict[str, Any]:
    """The table's rows and note at ``threshold`` (a new mapping; ``data`` is left as it is);
    the note shows ``shown`` (a figure's marker) for the threshold when given."""
    keys = {column["key"] for column in data["columns"]}
    out = dict(data, rows=[dict(row) for row in data["rows"]])
    for row in out["rows"]:
        if "test_anls_per_round" in keys:
            reached = first_at_threshold(rounds(row, clients_per_round), threshold)
            row["round_at_threshold"] = "not reached" if reached is None else reached.round
            row["bytes_to_threshold"] = (
                "n/a" if reached is None else format_bytes(reached.total_bytes)
            )
        elif "reaches_threshold" in keys:
            row["reaches_threshold"] = "yes" if row["test_anls"] >= threshold else "no"
        else:
            raise ValueError("the table has neither test_anls_per_round nor reaches_threshold")
    out["note"] = f"threshold: {shown or threshold} ({SOURCE})"
    return out


def main(argv: list[str] | None = None) -> None:
    """Rewrite each named data file at the threshold."""
    parser = argparse.ArgumentParser(prog="python -m experiments.rethreshold",
                                     description=__doc__.splitlines()[0])  # fmt: skip
    parser.add_argument("files", type=Path, nargs="+")
    given = parser.add_mutually_exclusive_group(required=True)
    given.add_argument("--threshold", type=float)
    given.add_argument("--figure", help="a reference figure's name, e.g. threshold")
    parser.add_argument("--clients-per-round", type=int, default=2)
    args = parser.parse_args(argv)
    command = command_line("experiments.rethreshold", sys.argv[1:] if argv is None else argv)
    threshold = args.threshold if args.figure is None else reference_figure(args.figure)
    shown = None if args.figure is None else f"{{{{ figure.{args.figure} }}}}"
    for path in args.files:
        data = rethreshold(json.loads(path.read_text(encoding="utf-8")), threshold,
                           args.clients_per_round, shown)  # fmt: skip
        columns = [Column(**column) for column in data["columns"]]
        write_results_table(
            path, columns, data["rows"], command=f"{data['command']}; {command}",
            date=data["date"], machine=data["machine"], note=data["note"],
            versions=data["versions"],
        )  # fmt: skip
        print(path)


if __name__ == "__main__":
    main()
