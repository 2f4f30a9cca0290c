"""Wall time of ``pflkit``'s start, as whole processes (not a test).

``python -m bench.startup [--runs 10] [--before DIR] [--json OUT]`` runs, as a person would type
them, ``pflkit --help``, the ``--help`` of every group and command (walked recursively from the
click group), ``pflkit dp epsilon --noise-multiplier 1 --sample-rate 0.1 --steps 10`` and
``pflkit train --help``, each ``--runs`` times after one untimed run, and prints the median and
the maximum of each beside its goal (0.3 s for a ``--help``, 1 s for the epsilon), with the
median CPU time (user + system, which a shared machine's load changes less); last, as
references, bare ``python`` runs that import only the libraries the epsilon imports, and those it
imported before its accountants' copies stood in for ``scipy.stats`` and ``scipy.signal``.
With ``hyperfine`` installed it times them with hyperfine instead. With ``--before DIR`` (an
export of an earlier commit) it runs each command from that tree and from this one alternately,
so that on a shared machine both columns see the same load.

The untimed run writes Python's bytecode cache, as any installation has after its first use:
``PYTHONDONTWRITEBYTECODE`` is dropped from the commands' environment, since with it set every
run would compile the kit's modules again. Figures are printed, not asserted; on a shared
machine note the load average it prints. Results: ``docs/results/startup.md``.

``--record PATH`` writes the run as that results table's data file (``docs/results/data/
startup.json``, :data:`TABLE_COLUMNS`): one row per command, the ``before`` columns from the
``--before`` tree (empty without one).
"""

from __future__ import annotations

import json
import os
import platform
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from experiments.results_file import Column, command_line, number, text, write_results_table

#: the goal of every ``--help`` and of the epsilon command, in seconds.
HELP_GOAL = 0.3
EPSILON_GOAL = 1.0
EPSILON_ARGS = ("dp", "epsilon", "--noise-multiplier", "1", "--sample-rate", "0.1", "--steps", "10")


def command_paths(group: click.Group) -> list[tuple[str, ...]]:
    """Every group and command below ``group`` (itself first), as argument paths, in help order.

    Args:
        group: the root click group.

    Returns:
        ``()`` for the root, then ``("data",)``, ``("data", "generate")``, ...
    """
    paths: list[tuple[str, ...]] = []

    def walk(command: click.Command, path: tuple[str, ...]) -> None:
        paths.append(path)
        if isinstance(command, click.Group):
            ctx = click.Context(command, info_name=path[-1] if path else "pflkit")
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None and not sub.hidden:
                    walk(sub, (*path, name))

    walk(group, ())
    return paths


#: references beside the epsilon, bare ``python`` runs that import only libraries: those the
#: epsilon imports (numpy, scipy's special functions, FFT and integration for opacus's RDP and
#: PRV and dp-accounting's PLD, attrs for dp-accounting's events), and those it imported until
#: its copies of opacus's and dp-accounting's code stood in for scipy.stats and scipy.signal
#: (accountant.analysis.light_stats and light_signal).
REFERENCES = (
    ("-c", "import numpy, scipy.special, scipy.fft, scipy.integrate, attr"),
    ("-c", "import numpy, scipy.special, scipy.signal, scipy.integrate, dp_accounting"),
)


def benchmark_commands() -> list[tuple[tuple[str, ...], float | None]]:
    """(arguments of pflkit, goal in seconds) of every command the bench times."""
    from pflkit.cli import main

    commands: list[tuple[tuple[str, ...], float | None]] = [
        ((*path, "--help"), HELP_GOAL) for path in command_paths(main)
    ]
    commands.append((EPSILON_ARGS, EPSILON_GOAL))
    # `pflkit train --help` once more at the end, the command the issue names beside the epsilon.
    commands.append((("train", "--help"), HELP_GOAL))
    return commands


def _environment() -> dict[str, str]:
    """The commands' environment: this one, with the bytecode cache allowed."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


#: seconds of the timed runs of one command: wall times and CPU times (user + system).
Timing = tuple[list[float], list[float]]


def _run_once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run of ``argv``.

    Raises:
        RuntimeError: when the command fails.
    """
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - started
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {result.stderr.decode()[-2000:]}")
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    return elapsed, cpu


def _timing(runs: list[tuple[float, float]]) -> Timing:
    return [wall for wall, _ in runs], [cpu for _, cpu in runs]


def time_with_subprocess(argv: list[str], runs: int, env: dict[str, str]) -> Timing:
    """Seconds of ``runs`` runs of ``argv`` after one untimed run.

    Raises:
        RuntimeError: when the command fails.
    """
    return _timing([_run_once(argv, env) for _ in range(runs + 1)][1:])


def time_side_by_side(
    argv: list[str], runs: int, env: dict[str, str], before_env: dict[str, str]
) -> tuple[Timing | None, Timing]:
    """Seconds of ``runs`` runs of ``argv`` with ``before_env`` and with ``env``, alternately
    (so both see the same load), after one untimed run of each; None for a command the
    ``before_env`` side does not have.

    Raises:
        RuntimeError: when the command fails with ``env``.
    """
    before: list[tuple[float, float]] | None = []
    after: list[tuple[float, float]] = []
    for index in range(runs + 1):
        if before is not None:
            try:
                measured = _run_once(argv, before_env)
            except RuntimeError:
                before = None
            else:
                before += [measured] if index else []
        measured = _run_once(argv, env)
        after += [measured] if index else []
    return (None if before is None else _timing(before)), _timing(after)


def time_with_hyperfine(argv: list[str], runs: int, env: dict[str, str]) -> Timing:
    """Seconds of ``runs`` runs of ``argv`` by hyperfine (one warm-up run, no shell: hyperfine
    splits the command line as a shell would, without starting one); hyperfine reports the
    mean CPU time only, given for every run."""
    with tempfile.TemporaryDirectory() as tmp:
        export = Path(tmp) / "hyperfine.json"
        subprocess.run(
            ["hyperfine", "--shell=none", "--warmup", "1", "--runs", str(runs),
             "--style", "none", "--export-json", str(export), shlex.join(argv)],
            env=env, check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        result = json.loads(export.read_text())["results"][0]
        return list(result["times"]), [result["user"] + result["system"]] * len(result["times"])


def _figures(timing: Timing | None) -> str:
    """``median max cpu`` of a command's timed runs (the CPU time's median), or dashes."""
    if timing is None:
        return f"{'-':>8} {'-':>8} {'-':>7}"
    walls, cpus = timing
    return f"{statistics.median(walls):>7.3f}s {max(walls):>7.3f}s {statistics.median(cpus):>6.3f}s"


def measurement(shown: str, goal: float | None, timing: Timing,
                before: Timing | None = None) -> dict[str, Any]:  # fmt: skip
    """One command's figures as ``--json`` writes them.

    Args:
        shown: the command as printed (``pflkit --help``, ``(reference) python -c '...'``).
        goal: its goal in seconds, or None for a reference.
        timing: its timed runs' wall and CPU seconds.
        before: the same from the ``--before`` tree, or None.
    """
    walls, cpus = timing
    return {"command": shown, "goal_s": goal, "median_s": statistics.median(walls),
            "max_s": max(walls), "times_s": walls, "cpu_s": cpus,
            "before_times_s": None if before is None else before[0],
            "before_cpu_s": None if before is None else before[1]}  # fmt: skip


#: The results table's columns (``docs/results/data/startup.json``): per command, the median and
#: the largest wall time and the median CPU time, from the ``--before`` tree and from this one.
TABLE_COLUMNS: tuple[Column, ...] = (
    text("command", "command"),
    text("goal", "goal", align="right"),
    number("before_median", "before: median", ".3f"),
    number("max", "max", ".3f"),
    number("cpu", "CPU", ".3f"),
    number("after_median", "after: median", ".3f"),
    number("max_2", "max", ".3f"),
    number("cpu_2", "CPU", ".3f"),
)

#: how a reference's printed command begins
REFERENCE = "(reference) "


def _side(walls: list[float] | None, cpus: list[float] | None, *, compared: bool) -> list[Any]:
    """Median, max and median CPU seconds (3 decimals); ``-`` for a command a compared tree
    lacks, empty cells without a compared tree."""
    if walls is None or cpus is None:
        return ["-" if compared else ""] * 3
    figures = (statistics.median(walls), max(walls), statistics.median(cpus))
    return [round(value, 3) for value in figures]


def table_rows(measurements: list[dict[str, Any]], *, compared: bool) -> list[dict[str, Any]]:
    """The results table's rows of :func:`measurement`'s dicts: the command as code (a
    repeated one marked ``(again, last)``), its goal, then both sides' figures (``compared``:
    whether a ``--before`` tree was timed)."""
    rows, seen = [], set()
    for m in measurements:
        shown = m["command"]
        command = (f"{REFERENCE}`{shown.removeprefix(REFERENCE)}`" if shown.startswith(REFERENCE)
                   else f"`{shown}`")  # fmt: skip
        if shown in seen:
            command += " (again, last)"
        seen.add(shown)
        before = _side(m["before_times_s"], m["before_cpu_s"], compared=compared)
        after = _side(m["times_s"], m["cpu_s"], compared=True)
        goal = "-" if m["goal_s"] is None else f"{m['goal_s']:g} s"
        rows.append(dict(zip((c.key for c in TABLE_COLUMNS),
                             (command, goal, *before, *after), strict=True)))  # fmt: skip
    return rows


def _cpu_model() -> str:
    """The processor's model name."""
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return names[0] if names else platform.processor()


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


@click.command()
@click.option("--runs", default=10, show_default=True, help="Timed runs per command.")
@click.option(
    "--pflkit",
    "executable",
    type=click.Path(dir_okay=False),
    default=None,
    help="The pflkit command to time (default: the one beside this Python).",
)
@click.option(
    "--before",
    "before_dir",
    type=click.Path(file_okay=False, exists=True),
    default=None,
    help="A checkout of an earlier commit (git archive COMMIT | tar -x -C DIR): each command is "
    "also run with DIR first on PYTHONPATH, alternately with this one.",
)
@click.option("--json", "json_out", type=click.Path(dir_okay=False), help="Also write JSON here.")
@click.option("--record", "record_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Write the run as this results table's data file "
              "(docs/results/data/NAME.json, shown by a results page).")  # fmt: skip
@click.option("--no-hyperfine", is_flag=True, help="Time with subprocess even if hyperfine exists.")
@click.option(
    "--only",
    default=None,
    help="Time only the commands (and references) whose line contains this text, e.g. "
    "'dp epsilon --noise'.",
)
def main(
    runs: int,
    executable: str | None,
    before_dir: str | None,
    json_out: str | None,
    record_path: Path | None,
    no_hyperfine: bool,
    only: str | None,
) -> None:
    """Time pflkit's --help pages and dp epsilon as whole processes."""
    executable = executable or str(Path(sys.executable).with_name("pflkit"))
    use_hyperfine = shutil.which("hyperfine") is not None and not no_hyperfine and not before_dir
    timer = time_with_hyperfine if use_hyperfine else time_with_subprocess
    env = _environment()
    before_env = None
    if before_dir:
        before_env = {**env, "PYTHONPATH": os.pathsep.join(
            [str(Path(before_dir).resolve()), *filter(None, [env.get("PYTHONPATH")])]
        )}  # fmt: skip
    click.echo(
        f"# {os.cpu_count()} cores, {_cpu_model()}, Python {platform.python_version()}, "
        f"load average {_load()}, {'hyperfine' if use_hyperfine else 'subprocess'}, "
        f"{runs} runs per command" + (f", before: {before_dir}" if before_dir else "")
    )
    columns = f"{'median':>8} {'max':>8} {'cpu':>7}"
    header = f"{'before: ' + columns:>33}   " if before_env else ""
    click.echo(f"{'command':<72} {'goal':>6} {header}{columns}")
    commands = [([executable, *args], "pflkit " + " ".join(args), goal)
                for args, goal in benchmark_commands()]  # fmt: skip
    commands += [
        ([sys.executable, *libraries], REFERENCE + shlex.join(["python", *libraries]), None)
        for libraries in REFERENCES
    ]
    if only:
        commands = [command for command in commands if only in command[1]]
    rows = []
    for argv, shown, goal in commands:
        before = None
        if before_env is not None:
            before, timing = time_side_by_side(argv, runs, env, before_env)
        else:
            timing = timer(argv, runs, env)
        median = statistics.median(timing[0])
        flag = "" if goal is None or median < goal else "  over the goal"
        goal_text = "-" if goal is None else f"{goal:.1f}s"
        before_text = f"{_figures(before)}   " if before_env is not None else ""
        click.echo(f"{shown:<72} {goal_text:>6} {before_text}{_figures(timing)}{flag}")
        rows.append(measurement(shown, goal, timing, before))
    click.echo(f"# load average after: {_load()}")
    if json_out:
        Path(json_out).write_text(json.dumps(rows, indent=2) + "\n")
    if record_path is not None:
        command = command_line("bench.startup", sys.argv[1:])
        click.echo(write_results_table(record_path, TABLE_COLUMNS, table_rows(rows, compared=before_env is not None),
                                       command=command))  # fmt: skip


if __name__ == "__main__":
    main()
