"""Peak resident memory of scoring a real-size checkpoint, against the size of its file.

``python -m bench.memorybench --data DIR --checkpoint DIR [--questions 20] [--json OUT]`` runs,
each as a child process of its own:

- ``evaluate``: ``pflkit evaluate CHECKPOINT --data DIR --split test --limit N --json``, as a
  participant types it (the checkpoint's values checked, then scored);
- ``worker``: what the evaluator's worker does with a submitted checkpoint, without the database
  (``evaluator.worker.runner.JobRunner._evaluate`` on a track-1 submission): the scorer's
  start-up (:meth:`evaluator.scoring.Scorer.prepare`, the checkpoint directory as the reference
  model, the test split cut to N questions), the checkpoint checks
  (:func:`evaluator.validation.checkpoint.validate_checkpoint`, finite values included), the
  binding's comparison of every tensor with the reference's
  (:func:`evaluator.validation.binding.check_changes`), track 2's noise floor over every tensor
  (:func:`evaluator.validation.noise_floor.tensor_changes`) and the scoring
  (:meth:`evaluator.scoring.Scorer.score`). The submission is a copy of the checkpoint's
  ``model.safetensors`` in a file of its own, as an upload is;
- ``floor``: ``pflkit evaluate`` with ``--batch-size 1 --max-answer-tokens 2`` on one torch
  thread (one question at a time on one stream): what the weights and the runtime take with
  almost no activations, the least any batch size can reach.

A child's peak resident set (``ru_maxrss`` of ``os.wait4``: resident pages of the files it maps
count, the weights' included) is printed beside the size of ``model.safetensors``. The worker's
is the largest of its steps' peaks (``VmHWM``, reset between steps through
``/proc/self/clear_refs``, which resets ``ru_maxrss`` too), each printed with the resident memory
after the step.
Linux only. The goal (issue 47) is a peak of at most 1.3 times the file. Results:
``docs/results/memory.md``; ``make bench`` runs it on ``pflkit model init --shape vt5-base``.

``--record-evaluate PATH`` and ``--record-steps PATH`` write the run into those results tables'
data files (``docs/results/data/memory_evaluate.json``, one row per path, and
``memory_worker_steps.json``, one row per worker step: the peak and its ratio to the file), in
the column ``--side`` names (``after`` by default); the other side's cells of the same rows, and
the earlier runs' commands, are kept from the file when it holds that table. Each run measures
the tree it runs in.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import click

from experiments.results_file import (
    Column,
    command_line,
    joined_commands,
    matching_table,
    text,
    write_results_table,
)

#: the goal: peak resident memory over the checkpoint file's size.
GOAL_RATIO = 1.3
MIB = 1024 * 1024


def _status_mib(field: str) -> float:
    """A ``/proc/self/status`` memory field (``VmHWM``, ``VmRSS``...) in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(field)


def _reset_peak() -> None:
    """Start a new ``VmHWM`` from the current resident set (Linux 4.0 and later)."""
    Path("/proc/self/clear_refs").write_text("5")


def run_child(argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Run a command; its peak resident memory (MiB), its seconds and its standard output.

    Raises:
        RuntimeError: when the command fails.
    """
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(argv, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        if process.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed: {err.read().decode()[-3000:]}")
        return usage.ru_maxrss / 1024, seconds, out.read().decode()


def worker_steps(data: Path, reference: Path, submission: Path, questions: int,
                 batch_size: int) -> dict[str, dict[str, float]]:  # fmt: skip
    """The worker's steps on one submission, each with its peak and its resident memory after.

    Args:
        data: the benchmark directory.
        reference: the reference checkpoint directory.
        submission: the submitted ``model.safetensors``.
        questions: test questions scored.
        batch_size: the scorer's batch size (the service's default, 32).

    Returns:
        step -> ``{"peak_mib", "after_mib", "seconds"}``.
    """
    from benchmark.data import load_split
    from benchmark.model.safetensors_header import MAX_HEADER_BYTES, MAX_TENSORS
    from evaluator.scoring import Scorer
    from evaluator.validation.binding import _Travelled, check_changes
    from evaluator.validation.checkpoint import validate_checkpoint
    from evaluator.validation.noise_floor import tensor_changes

    steps: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="pflkit-memorybench-") as cache:
        scorer = Scorer(data, reference_model=str(reference), batch_size=batch_size,
                        cache_root=Path(cache), device="cpu")  # fmt: skip

        def start_up() -> None:
            split = load_split(data, split="test")
            scorer.__dict__["_test_split"] = split.select(range(min(questions, len(split))))
            scorer.prepare()

        def later_steps() -> dict[str, Callable[[], object]]:
            spec = scorer.expected_spec
            return {
                "check_checkpoint": partial(validate_checkpoint, submission, spec,
                                            max_header_bytes=MAX_HEADER_BYTES,
                                            max_tensors=MAX_TENSORS),
                "bind": partial(check_changes, submission, scorer.reference,
                                _Travelled(full=set(spec)), rank=None),
                "noise_floor": partial(tensor_changes, submission, scorer.reference, set(spec),
                                       rounds=1),
                "score": partial(scorer.score, submission),
            }  # fmt: skip

        for name, action in [("start-up", start_up), *later_steps().items()]:
            _reset_peak()
            started = time.perf_counter()
            action()
            steps[name] = {"peak_mib": _status_mib("VmHWM"), "after_mib": _status_mib("VmRSS"),
                           "seconds": time.perf_counter() - started}  # fmt: skip
    return steps


#: what each path runs, as its table row says (``{questions}``: test questions scored)
PATH_TEXTS = {
    "evaluate": "`pflkit evaluate CKPT --split test --limit {questions}` (batch size 64)",
    "worker": "the worker on a submitted copy of the file (batch size {batch_size}), its "
              "largest step",
    "floor": "floor: `pflkit evaluate` with `--batch-size 1 --max-answer-tokens 2`, one thread",
}
#: what each worker step does, as its table row says
STEP_TEXTS = {
    "start-up": "start-up (`Scorer.prepare`: test split, processor, reference model)",
    "check_checkpoint": "checkpoint checks (header, spec, finite values)",
    "bind": "binding: every tensor compared with the reference's",
    "noise_floor": "track 2's noise floor over every tensor",
    "score": "scoring (`Scorer.score`)",
}
#: the compared runs, a column each in both tables
SIDES = ("before", "after")


def evaluate_columns(questions: int) -> tuple[Column, ...]:
    """The columns of ``memory_evaluate.json``: what runs, then each side's peak."""
    return (text(f"what_runs_{questions}_test_questions", f"what runs ({questions} test questions)"),
            *(text(side, side, align="right") for side in SIDES))  # fmt: skip


#: the columns of ``memory_worker_steps.json``: the worker's step, then each side's peak
STEP_COLUMNS: tuple[Column, ...] = (
    text("worker_step", "worker step"), *(text(side, side, align="right") for side in SIDES)
)


def peak_text(peak_mib: float, file_mib: float) -> str:
    """A peak as the tables show it: ``2,761 MiB, 2.15x`` (its ratio to the file's size)."""
    return f"{peak_mib:,.0f} MiB, {peak_mib / file_mib:.2f}x"


def evaluate_cells(rows: list[dict[str, Any]], questions: int, batch_size: int) -> dict[str, str]:
    """Each path's row text and its peak's cell, of the rows the bench measured."""
    return {PATH_TEXTS[row["path"]].format(questions=questions, batch_size=batch_size):
            peak_text(row["peak_mib"], row["file_mib"]) for row in rows}  # fmt: skip


def step_cells(rows: list[dict[str, Any]]) -> dict[str, str]:
    """Each worker step's row text and its peak's cell (none without the worker's row)."""
    return {STEP_TEXTS.get(name, name): peak_text(figures["peak_mib"], row["file_mib"])
            for row in rows for name, figures in row.get("steps", {}).items()}  # fmt: skip


def record_side(path: Path, columns: tuple[Column, ...], cells: dict[str, str], side: str, *,
                command: str) -> Path:  # fmt: skip
    """Write ``cells`` (row text -> peak) as the ``side`` column of the table at ``path``; the
    other side's cells of the same rows and the earlier commands are kept when the file holds
    this table."""
    first = columns[0].key
    earlier = matching_table(path, columns)
    kept = {row[first]: row for row in earlier["rows"]} if earlier else {}
    rows = [{first: what, **{other: kept.get(what, {}).get(other, "") for other in SIDES},
             side: cell} for what, cell in cells.items()]  # fmt: skip
    if earlier is not None:
        command = joined_commands(earlier["command"], command)
    return write_results_table(path, columns, rows, command=command)


def _machine() -> str:
    """Cores, CPU model and Python version, for the printed header."""
    cpu = platform.processor()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        cpu = next((line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                    if line.startswith("model name")), cpu)  # fmt: skip
    return f"{os.cpu_count()} cores, {cpu}, Python {platform.python_version()}"


@click.command()
@click.option("--data", type=click.Path(exists=True, file_okay=False, path_type=Path),
              required=True, help="A benchmark directory (`pflkit data generate`).")
@click.option("--checkpoint", type=click.Path(exists=True, file_okay=False, path_type=Path),
              required=True,
              help="A checkpoint directory (`pflkit model init --shape vt5-base`).")
@click.option("--questions", default=20, show_default=True, help="Test questions scored.")
@click.option("--batch-size", default=32, show_default=True, help="The worker's batch size.")
@click.option("--paths", default="evaluate,worker,floor", show_default=True,
              help="Comma-separated: evaluate, worker, floor.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), help="Also write JSON here.")
@click.option("--record-evaluate", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the paths' peaks into this results table's data file "
              "(docs/results/data/memory_evaluate.json).")
@click.option("--record-steps", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the worker's steps' peaks into this results table's data file "
              "(docs/results/data/memory_worker_steps.json).")
@click.option("--side", type=click.Choice(SIDES), default="after", show_default=True,
              help="The recorded tables' column this run fills.")
@click.option("--worker-child", type=click.Path(path_type=Path), hidden=True,
              help="(internal) run the worker's steps on this submission file in this process.")
def main(data: Path, checkpoint: Path, questions: int, batch_size: int, paths: str,
         json_out: str | None, record_evaluate: Path | None, record_steps: Path | None,
         side: str, worker_child: Path | None) -> None:  # fmt: skip
    """Peak resident memory of `pflkit evaluate` and of the worker against the file's size."""
    if worker_child is not None:
        steps = worker_steps(data, checkpoint, worker_child, questions, batch_size)
        click.echo(json.dumps(steps))
        return
    weights = checkpoint / "model.safetensors"
    file_mib = weights.stat().st_size / MIB
    click.echo(f"# {_machine()}, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    click.echo(f"# {weights}: {file_mib:,.0f} MiB; goal: peak <= {GOAL_RATIO}x the file "
               f"({GOAL_RATIO * file_mib:,.0f} MiB); {questions} test questions")  # fmt: skip
    rows = []
    with tempfile.TemporaryDirectory(prefix="pflkit-memorybench-") as scratch:
        env = {**os.environ, "PFLKIT_CACHE_DIR": str(Path(scratch) / "cache")}
        for path in [p.strip() for p in paths.split(",") if p.strip()]:
            if path in ("evaluate", "floor"):
                pflkit = str(Path(sys.executable).with_name("pflkit"))
                argv = [pflkit, "evaluate", str(checkpoint), "--data", str(data), "--split",
                        "test", "--limit", str(questions), "--json"]  # fmt: skip
                child_env = env
                if path == "floor":
                    argv += ["--batch-size", "1", "--max-answer-tokens", "2"]
                    child_env = {**env, "OMP_NUM_THREADS": "1"}
                peak, seconds, _ = run_child(argv, child_env)
                rows.append({"path": path, "peak_mib": peak, "seconds": seconds})
            elif path == "worker":
                submission = Path(scratch) / "submission" / "model.safetensors"
                submission.parent.mkdir()
                shutil.copyfile(weights, submission)
                argv = [sys.executable, "-m", "bench.memorybench", "--data", str(data),
                        "--checkpoint", str(checkpoint), "--questions", str(questions),
                        "--batch-size", str(batch_size), "--worker-child", str(submission)]  # fmt: skip
                peak, seconds, out = run_child(argv, env)
                steps = json.loads(out.strip().splitlines()[-1])
                # clearing VmHWM between steps clears ru_maxrss too: the peak is the steps' own
                peak = max(peak, *(figures["peak_mib"] for figures in steps.values()))
                rows.append({"path": path, "peak_mib": peak, "seconds": seconds, "steps": steps})
                submission.unlink()
            else:
                raise click.BadParameter(f"unknown path {path!r}", param_hint="--paths")
            row = rows[-1]
            row.update(file_mib=file_mib, ratio=row["peak_mib"] / file_mib)
            flag = "" if row["ratio"] <= GOAL_RATIO else "  over the goal"
            click.echo(f"{path:<10} peak {row['peak_mib']:>7,.0f} MiB  {row['ratio']:.2f}x the "
                       f"file  {seconds:6.1f} s{flag}")  # fmt: skip
            for name, figures in row.get("steps", {}).items():
                click.echo(f"  {name:<18} peak {figures['peak_mib']:>7,.0f} MiB "
                           f"({figures['peak_mib'] / file_mib:.2f}x), after "
                           f"{figures['after_mib']:>7,.0f} MiB, {figures['seconds']:6.1f} s")  # fmt: skip
    if json_out:
        Path(json_out).write_text(json.dumps(rows, indent=2) + "\n")
    command = command_line("bench.memorybench", sys.argv[1:])
    if record_evaluate is not None:
        cells = evaluate_cells(rows, questions, batch_size)
        click.echo(record_side(record_evaluate, evaluate_columns(questions), cells, side,
                               command=command))  # fmt: skip
    if record_steps is not None:
        click.echo(record_side(record_steps, STEP_COLUMNS, step_cells(rows), side,
                               command=command))  # fmt: skip


if __name__ == "__main__":
    main()
