"""Recorded audits' bounds at the audit's current level, from the guess counts their tables hold.

A results table of audits (``docs/results/data/NAME.json``) with a ``guesses_right`` column
(``"v of r"``, the best plan's right guesses of its guesses, ``" (in)"`` for "in" guesses alone)
gets its bound column recomputed by both analyses at the level the audit now tests each plan at
(:func:`bench.audit_ceiling.recorded_bounds`: 0.05 / 16 for 100 membership canaries), the
larger of the two as the verdict takes it, and its ``contradicted`` column (when it has one) as
that bound against the row's claim (``claim`` or ``claim_delta``, when it is a number). Counts
of a plan chosen at an older level give a lower bound of what the audit now reports (it takes the
best of its plans, whose other counts were not recorded). The other figures and the provenance stay; this command is appended to the file's.

    python -m bench.audit_relevel docs/results/data/audit_mini.json --bound question_bound
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from bench.audit_ceiling import level_text, membership_level, recorded_bounds
from experiments.results_file import Column, command_line, write_results_table

COUNTS = re.compile(r"^(\d+) of (\d+)")


def relevel(data: dict[str, Any], bound: str, canaries: int = 100) -> dict[str, Any]:
    """The table with ``bound`` (a column key) and ``contradicted`` recomputed; a new mapping."""
    out = dict(data, rows=[dict(row) for row in data["rows"]])
    level = level_text(membership_level(canaries))
    for column in out["columns"]:
        if column["key"] == bound:
            column["label"] = re.sub(r"bound.*$", f"bound ({level}, SNJ or f-DP)", column["label"])
            column["format"] = ".3f"
    keys = {column["key"] for column in out["columns"]}
    for row in out["rows"]:
        counts = COUNTS.match(str(row["guesses_right"]))
        if counts is None:
            row[bound] = ""
            continue
        correct, guesses = int(counts.group(1)), int(counts.group(2))
        row[bound] = round(max(recorded_bounds(canaries, guesses, correct)), 3)
        claim = re.match(r"\d+(\.\d+)?", str(row.get("claim", row.get("claim_delta", ""))))
        if "contradicted" in keys and claim is not None:
            contradicted = row[bound] > float(claim.group(0))
            row["contradicted"] = "**yes**" if contradicted else "no"
    return out


def main(argv: list[str] | None = None) -> None:
    """Rewrite the data file with its bounds at the audit's level."""
    parser = argparse.ArgumentParser(prog="python -m bench.audit_relevel",
                                     description=__doc__.splitlines()[0])  # fmt: skip
    parser.add_argument("file", type=Path)
    parser.add_argument("--bound", required=True, help="the bound column's key")
    parser.add_argument("--canaries", type=int, default=100)
    args = parser.parse_args(argv)
    command = command_line("bench.audit_relevel", sys.argv[1:] if argv is None else argv)
    data = relevel(json.loads(args.file.read_text(encoding="utf-8")), args.bound, args.canaries)
    write_results_table(
        args.file, [Column(**column) for column in data["columns"]], data["rows"],
        command=f"{data['command']}; {command}", date=data["date"], machine=data["machine"],
        note=data.get("note"), versions=data["versions"],
    )  # fmt: skip
    print(args.file)


if __name__ == "__main__":
    main()
