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

Usage::

    python -m bench.reproduction_margins --data .bench/tiny \\
        --out docs/results/reproduction_margins.jsonl
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

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


def main(argv: list[str] | None = None) -> None:
    """Measure both presets and append one line each to ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--other-threads", type=int, default=2)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    import torch

    from evaluator.reproduction.verdict import DEFAULT_TOLERANCE

    stamp = {"date": dt.date.today().isoformat(), "data": args.data.name,
             "machine": platform.processor() or platform.machine(), "torch": torch.__version__,
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
