"""``pflkit reproduce``: the organisers re-run a run directory's recipe and print the verdict."""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.command("reproduce")
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--data", "data_dir", required=True,
              type=click.Path(file_okay=False, exists=True, path_type=Path),
              help="The organisers' benchmark directory (its participant/ training files).")
@click.option("--threads", type=click.IntRange(1, 1024),
              help="torch threads of the re-run (default: the recipe's).")
@click.option("--tolerance", type=click.FloatRange(0, 1),
              help="Across machine types: the largest model distance over the change from the "
                   "base (default: the evaluator's).")
@click.option("--cpu-seconds", type=click.IntRange(1), default=3600, show_default=True,
              help="The sandbox's CPU-time limit.")
@click.option("--memory-gib", type=click.FloatRange(0.5), default=8.0, show_default=True,
              help="The sandbox's memory limit.")
@click.option("--work", type=click.Path(file_okay=False, path_type=Path),
              help="Keep the kit copy and the re-run here (default: a temporary folder).")
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as JSON.")
def reproduce(run_dir: Path, data_dir: Path, threads: int | None, tolerance: float | None,
              cpu_seconds: int, memory_gib: float, work: Path | None, as_json: bool) -> None:  # fmt: skip
    """Re-run RUN_DIR's recipe.json in a network-less sandbox on --data and compare.

    Prints whether the run was reproduced exactly, within tolerance, not reproduced (with the
    first round, message and tensor that differ) or failed (why); exits 1 unless reproduced.
    The recipe's seed and files are never printed.
    """
    from evaluator.reproduction.rerun import reproduce_run_directory
    from evaluator.reproduction.sandbox import SandboxLimits, sandbox_unavailable

    unavailable = sandbox_unavailable()
    if unavailable is not None:
        raise click.ClickException(f"the sandbox cannot run here: {unavailable}")
    if work is not None and work.exists() and any(work.iterdir()):
        raise click.BadParameter(f"{work} is not empty; choose a new folder", param_hint="--work")
    limits = SandboxLimits(cpu_seconds=cpu_seconds, wall_seconds=2.0 * cpu_seconds,
                           memory_bytes=int(memory_gib * 2**30))  # fmt: skip
    result = reproduce_run_directory(run_dir, data_dir, limits=limits, threads=threads,
                                     work=work, tolerance=tolerance)  # fmt: skip
    if as_json:
        click.echo(json.dumps(result.as_dict(), indent=2))
    else:
        verdict = result.verdict
        click.echo(f"{verdict.outcome}: {verdict.reason}")
        for note in result.notes:
            click.echo(f"note: {note}")
        for path, kind in result.bundle.items():
            click.echo(f"participant file ({kind}): {path}")
        click.echo(f"re-run: {result.seconds:.1f} s")
    if not result.verdict.reproduced:
        raise SystemExit(1)
