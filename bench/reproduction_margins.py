"""The smallest lies the re-run's tolerance still catches across thread counts.

On the recipe's own machine type and thread count every lie is caught by bytes (the digests
and the checkpoint must be equal). Across machine types only the tolerance stands between a
small lie and a *reproduced within tolerance*: this bench measures where that line falls.

1. The honest run of each preset is trained with one torch thread and re-run from its recipe by
   the evaluator's code in the sandbox with ``--other-threads`` (float sums in another order):
   the honest distance, the figure the tolerance must stay above.
2. **A checkpoint edited after training**: the honest checkpoint plus Gaussian noise whose norm
   is a fraction r of the run's change from the base, judged against that re-run, for each r.
3. **A DP run trained at a fraction s of its declared noise, its server step divided by s** so
   the model's change carries the declared noise energy (the lie the noise floor cannot see):
   trained for each s with the honest run's seed, its declarations and recipe replaced by the
   honest ones, judged against the same re-run.

The communication log, the declarations and the recipe's preset are compared exactly on every
machine, so a lie in them is caught at any size (the test suite has each case).

``--record PATH`` then writes the results table of ``--out``'s latest line of each preset (one
column per preset, :func:`table`) as that data file
(``docs/results/data/reproduction_margins.json``), dated and placed by the lines;
``--record-only`` writes it from the lines already there, measuring nothing.

Usage::

    python -m bench.reproduction_margins --data .bench/tiny \\
        --out docs/results/reproduction_margins.jsonl \\
        --record docs/results/data/reproduction_margins.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.reproduction import measured_where, preset_rounds, read_lines, short_exponent
from experiments.results_file import (
    Column,
    command_line,
    machine_description,
    text,
    write_results_table,
)

#: fractions of the change from the base added to the checkpoint as noise
EDITS = (0.01, 0.03, 0.05, 0.07, 0.09, 0.11, 0.15, 0.2)
#: fractions of the declared noise multiplier a DP liar trains with
NOISE_CUTS = (0.99, 0.95, 0.9, 0.8, 0.5)
DP_PRESET, NOISE, SERVER_LR = "dp-lora", 1.0, 0.05
#: the declarations a liar takes from the honest run
DECLARATIONS = ("submission.json", "privacy.json", "recipe.json")


def train(data: Path, out: Path, preset: str, *options: str) -> None:
    """``pflkit train`` of ``preset`` at its full length on one thread (no validation)."""
    command = [sys.executable, "-m", "pflkit.cli", "train", "--preset", preset, "--data",
               str(data), "--out", str(out), "--threads", "1", "--val-limit", "0",
               "--no-progress", *options]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True)


def edited(run: Path, out: Path, fraction: float, base: Path, seed: int = 0) -> Path:
    """A copy of ``run`` whose checkpoint moved by ``fraction`` of its change from the base."""
    import torch
    from safetensors.torch import load_file, save_file

    shutil.copytree(run, out)
    model, start = load_file(run / "checkpoint" / "model.safetensors"), load_file(base)
    change = sum(float(((t.double() - start[n].double()) ** 2).sum())
                 for n, t in model.items() if n in start) ** 0.5  # fmt: skip
    generator = torch.Generator().manual_seed(seed)
    noise = {n: torch.randn(t.shape, generator=generator, dtype=torch.float64)
             for n, t in model.items() if t.is_floating_point()}  # fmt: skip
    scale = fraction * change / sum(float((z**2).sum()) for z in noise.values()) ** 0.5
    for name, z in noise.items():
        model[name] = (model[name].double() + scale * z).to(model[name].dtype)
    save_file(model, out / "checkpoint" / "model.safetensors", metadata={"format": "pt"})
    return out


def judged(submitted: Path, rerun: Path, base: Path, tolerance: float) -> dict[str, Any]:
    """The verdict of ``submitted`` against a re-run made on another thread count."""
    from evaluator.reproduction.verdict import RunFiles, compare

    verdict = compare(RunFiles.of_run_directory(submitted), RunFiles.of_run_directory(rerun),
                      base_model=base, same_machine=False, tolerance=tolerance)  # fmt: skip
    return {"verdict": verdict.outcome, "ratio": verdict.figures.get("ratio")}


def measure(preset: str, data: Path, root: Path, threads: int, tolerance: float,
            options: tuple[str, ...] = ()) -> tuple[dict[str, Any], Path, Path]:  # fmt: skip
    """Train the honest run, re-run it on ``threads``; its row, run and re-run directories."""
    from benchmark.model.loading import resolve_checkpoint
    from evaluator.reproduction.rerun import reproduce_run_directory

    honest = root / preset
    train(data, honest, preset, *options)
    work = root / f"{preset}-rerun"
    work.mkdir()
    result = reproduce_run_directory(honest, data, threads=threads, work=work,
                                     tolerance=tolerance)  # fmt: skip
    base = resolve_checkpoint("base") / "model.safetensors"
    row = {"preset": preset, "honest": {"verdict": result.verdict.outcome,
                                        "ratio": result.verdict.figures.get("ratio")}}
    row["edits"] = {str(r): judged(edited(honest, root / f"{preset}-edit-{r}", r, base),
                                   work / "scratch" / "run", base, tolerance)
                    for r in EDITS}  # fmt: skip
    return row, honest, work / "scratch" / "run"


def noise_cuts(data: Path, root: Path, honest: Path, rerun: Path, tolerance: float
               ) -> dict[str, Any]:  # fmt: skip
    """Each DP liar's verdict against the honest run's re-run."""
    from benchmark.model.loading import resolve_checkpoint

    base = resolve_checkpoint("base") / "model.safetensors"
    cuts = {}
    for fraction in NOISE_CUTS:
        liar = root / f"liar-{fraction}"
        train(data, liar, DP_PRESET, "--noise-multiplier", str(NOISE * fraction),
              "--server-lr", str(SERVER_LR / fraction))  # fmt: skip
        for name in DECLARATIONS:
            shutil.copyfile(honest / name, liar / name)
        cuts[str(fraction)] = judged(liar, rerun, base, tolerance)
        print(f"noise x{fraction}: {cuts[str(fraction)]}", flush=True)
    return cuts


#: the verdict of a lie the re-run catches
CAUGHT = "not reproduced"


def table(lines: list[dict[str, Any]]) -> tuple[tuple[Column, ...], list[dict[str, Any]]]:
    """The results table of the bench's lines (the latest of each preset): one column per
    preset, one row per submission (the honest run, each edit, each noise cut), each cell the
    distance between the models over the re-run's change from the base. The smallest edit that
    every preset's re-run catches is marked.

    Raises:
        ValueError: without lines.
    """
    latest = {line["preset"]: line for line in lines}
    if not latest:
        raise ValueError("no line to tabulate")
    keys = {preset: f"{preset.replace('-', '_')}_{preset_rounds(preset)}_rounds" for preset in latest}
    columns = (text("what_was_submitted", "what was submitted"),
               *(text(keys[preset], f"`{preset}` ({preset_rounds(preset)} rounds)", align="right")
                 for preset in latest))  # fmt: skip

    def row(what: str, part: str, fraction: str | None = None) -> dict[str, Any]:
        cells = {}
        for preset, line in latest.items():
            judged = line.get(part, {})
            judged = judged.get(fraction, {}) if fraction is not None else judged
            cells[keys[preset]] = short_exponent(judged.get("ratio")) if judged else ""
        return {"what_was_submitted": what, **cells}

    edits = sorted({fraction for line in latest.values() for fraction in line["edits"]}, key=float)
    caught = next((fraction for fraction in edits
                   if all(line["edits"].get(fraction, {}).get("verdict") == CAUGHT
                          for line in latest.values())), None)  # fmt: skip
    tolerance = next(iter(latest.values())).get("tolerance")
    rows = [row("the honest run", "honest")]
    for index, fraction in enumerate(edits):
        share = f"{float(fraction):.0%}"
        what = f"... {share}" if index else f"checkpoint + noise of {share} of the change"
        if fraction == caught:
            what += f" (first caught at tolerance {tolerance:g})"
        rows.append(row(what, "edits", fraction))
    cuts = sorted({f for line in latest.values() for f in line.get("noise_cuts", {})},
                  key=float, reverse=True)  # fmt: skip
    for index, fraction in enumerate(cuts):
        what = (f"... {fraction}" if index else
                f"trained at {fraction} of the declared noise, server step / {fraction}")
        rows.append(row(what, "noise_cuts", fraction))
    return columns, rows


def main(argv: list[str] | None = None) -> None:
    """Measure both presets (unless ``--record-only``) and write the table (``--record``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--other-threads", type=int, default=2)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--record", type=Path, default=None,
                        help="write the results table of --out's lines as this data file "
                             "(docs/results/data/NAME.json, shown by a results page)")
    parser.add_argument("--record-only", action="store_true",
                        help="measure nothing: write --record from the lines already in --out")
    args = parser.parse_args(argv)
    if args.record_only and args.record is None:
        parser.error("--record-only needs --record")
    if not args.record_only:
        if args.data is None:
            parser.error("--data is needed to measure")
        measure_both(args)
    if args.record is not None:
        lines = read_lines(args.out)
        columns, rows = table(lines)
        command = command_line("bench.reproduction_margins", sys.argv[1:] if argv is None else argv)
        print(write_results_table(args.record, columns, rows, command=command,
                                  **measured_where(lines)))  # fmt: skip


def measure_both(args: argparse.Namespace) -> None:
    """Measure both presets and append one line each to ``args.out``."""
    import torch

    from evaluator.reproduction.verdict import DEFAULT_TOLERANCE

    stamp = {"date": dt.date.today().isoformat(), "data": args.data.name,
             "machine": machine_description(), "torch": torch.__version__,
             "tolerance": DEFAULT_TOLERANCE, "other_threads": args.other_threads}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="reproduction-margins-") as directory:
        root = Path(directory)
        rows = []
        dp_row, honest, rerun = measure(DP_PRESET, args.data, root, args.other_threads,
                                        DEFAULT_TOLERANCE, ("--noise-multiplier", str(NOISE)))
        dp_row["noise_cuts"] = noise_cuts(args.data, root, honest, rerun, DEFAULT_TOLERANCE)
        rows.append(dp_row)
        rows.append(measure("fedavg", args.data, root, args.other_threads, DEFAULT_TOLERANCE)[0])
    with args.out.open("a", encoding="utf-8") as handle:
        for row in rows:
            print(json.dumps({**row, **stamp}), flush=True)
            handle.write(json.dumps({**row, **stamp}) + "\n")


if __name__ == "__main__":
    main()
