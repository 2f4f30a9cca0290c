"""Track 2's optimiser table over several training seeds: one ``--track optimiser --seed S`` output
directory per seed, combined into one table.

    python -m experiments.track2_seeds OUT_SEED0 OUT_SEED1 --write docs/results/data/optimiser_track2.json

Each cell is every seed's val ANLS on the whole split, then their mean, then the RDP epsilon that
``pflkit dp verify`` computed for each seed's declaration (``RUN/verify.json``), e.g.
``0.2843 / 0.2612 / 0.2728 (1.000, 1.000)``. A run that has not finished (no ``val.json`` or no
``verify.json``) is an error: the table is only written whole.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

from experiments.catalog import EPSILONS, OPTIMISER_TRACK2_METHODS
from experiments.results_file import Column, Table, code, command_line, text

#: The rows of the table (the optimiser track's track-2 methods).
METHODS = OPTIMISER_TRACK2_METHODS
COLUMNS: tuple[Column, ...] = (
    code("method", "method"),
    *(text(f"epsilon_{e}", f"epsilon {e}", align="right") for e in EPSILONS),
)


def seed_figures(out: Path, method: str, epsilon: int) -> tuple[float, float]:
    """One seed's run: its val ANLS and the epsilon the accountant verified.

    Raises:
        FileNotFoundError: when the run has no ``val.json`` or ``verify.json`` yet.
    """
    run = out / f"{method}-eps{epsilon}"
    missing = [name for name in ("val.json", "verify.json") if not (run / name).is_file()]
    if missing:
        raise FileNotFoundError(
            f"{run}: no {' or '.join(missing)}; finish the run with "
            f"`python -m experiments.run --track optimiser --out {out} --only {run.name}` first"
        )
    anls = json.loads((run / "val.json").read_text(encoding="utf-8"))["anls"]
    verified = json.loads((run / "verify.json").read_text(encoding="utf-8"))["epsilon"]["rdp"]
    return float(anls), float(verified)


def cell(figures: Sequence[tuple[float, float]]) -> str:
    """``a / b / mean (eps_a, eps_b)`` for the seeds' (val ANLS, verified epsilon) pairs."""
    scores = [f"{anls:.4f}" for anls, _ in figures]
    mean = statistics.fmean(anls for anls, _ in figures)
    epsilons = ", ".join(f"{verified:.3f}" for _, verified in figures)
    return f"{' / '.join(scores)} / {mean:.4f} ({epsilons})"


def seeds_table(outs: Sequence[Path], base_anls: float | None = None) -> Table:
    """The table of :data:`METHODS` at every epsilon over the seeds' output directories."""
    rows = [
        {
            "method": method,
            **{
                f"epsilon_{e}": cell([seed_figures(out, method, e) for out in outs])
                for e in EPSILONS
            },
        }
        for method in METHODS
    ]
    base = "" if base_anls is None else f" Base: {base_anls:.4f}."
    seeds = " / ".join(f"seed {i}" for i in range(len(outs)))
    note = (
        "Track 2's optimiser axis (the runners-up' momentum SGD against AdamW) on `mini` (shipped "
        f"base, official metric, whole val split). Each cell: {seeds} / mean (verified RDP "
        f"epsilon of each seed's declaration).{base}"
    )
    return Table(COLUMNS, rows, note)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("outs", nargs="+", type=Path, help="one --track optimiser OUT per seed")
    parser.add_argument("--write", type=Path, required=True, help="the table's data file")
    parser.add_argument("--base-anls", type=float, help="the base's val ANLS, named in the note")
    parser.add_argument("--machine", help="the machine the runs were trained on")
    args = parser.parse_args(argv)
    try:
        table = seeds_table(args.outs, args.base_anls)
    except FileNotFoundError as error:
        parser.error(str(error))
    provenance = {"machine": args.machine} if args.machine else {}
    command = command_line("experiments.track2_seeds", sys.argv[1:] if argv is None else argv)
    print(f"table: {table.write(args.write, command=command, **provenance)}")


if __name__ == "__main__":
    main()
