"""``pflkit`` starts light: which modules its help pages and its accounting commands import.

Each check runs the click group in a fresh interpreter, as the console script does, and reads
``sys.modules`` afterwards: a help page loads click and the kit's command modules only, and
``pflkit dp epsilon|noise|verify`` compute without torch (opacus's accountants are loaded
without the ``opacus`` package, :mod:`accountant.analysis.opacus_accounting`) and without
``scipy.stats`` and ``scipy.signal`` (dp-accounting's PLD without the ``dp_accounting`` package,
:mod:`accountant.analysis.dp_accounting_pld`). Modules, not timings: the wall times are
``bench/startup.py``'s (docs/results/startup.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: what no help page and no accounting command may import (top-level packages).
HEAVY = (
    "torch", "transformers", "opacus", "peft", "fastapi", "starlette", "uvicorn", "sqlalchemy",
    "alembic", "pandas", "matplotlib", "bitsandbytes", "flwr", "datasets", "safetensors",
)  # fmt: skip
#: what a help page may not import either (the accounting commands need them).
NOT_FOR_HELP = ("numpy", "scipy", "dp_accounting", "rich")

#: the kit's packages, whose modules any command may import.
KIT = ("accountant", "baselines", "benchmark", "evaluator", "leaderboard", "pflkit")

#: Runs ``pflkit ARGS`` for each ARGS of argv[1] (JSON) in this interpreter, as the console
#: script does; prints, as JSON, each run's exit code and the top-level modules it added. With
#: "--help" as argv[1] it runs the help of every group and command, walked from the group.
_CHILD = r"""
import contextlib, io, json, sys
import click
from pflkit.cli import main

def walk(command, path):
    yield path
    if isinstance(command, click.Group):
        ctx = click.Context(command, info_name="pflkit")
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None:
                yield from walk(sub, (*path, name))

def top_level():
    return {name.partition(".")[0] for name in sys.modules}

if sys.argv[1] == "--help":
    runs = [[*path, "--help"] for path in walk(main, ())]
else:
    runs = json.loads(sys.argv[1])
report = []
for args in runs:
    before = top_level()
    with contextlib.redirect_stdout(io.StringIO()) as out:
        try:
            main(args, prog_name="pflkit", standalone_mode=False)
            code = 0
        except SystemExit as exit:
            code = exit.code or 0
    report.append({"args": args, "code": code, "added": sorted(top_level() - before),
                   "usage": out.getvalue().startswith("Usage: pflkit"),
                   "output": out.getvalue()[-4000:]})
print(json.dumps({"runs": report, "modules": sorted(top_level()),
                  "scipy": sorted(name for name in sys.modules if name.count(".") == 1
                                  and name.startswith("scipy."))}))
"""


def _run(argument: str) -> dict:
    """The child's report for ``argument`` (``--help`` or a JSON list of argument lists)."""
    completed = subprocess.run(
        [sys.executable, "-c", _CHILD, argument],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _introduced_by(report: dict, names: tuple[str, ...]) -> dict[str, str]:
    """Forbidden module -> the command that first imported it."""
    found = {}
    for run in report["runs"]:
        for name in set(run["added"]) & set(names):
            found.setdefault(name, "pflkit " + " ".join(run["args"]))
    return found


def test_every_help_page_imports_click_and_the_kit_only() -> None:
    report = _run("--help")
    pages = {" ".join(run["args"]) for run in report["runs"]}
    assert {"--help", "train --help", "dp epsilon --help", "evaluator backup --help"} <= pages
    assert all(run["code"] == 0 and run["usage"] for run in report["runs"])
    assert _introduced_by(report, HEAVY + NOT_FOR_HELP) == {}
    assert not set(report["modules"]) & set(HEAVY + NOT_FOR_HELP)
    third_party = {
        name for name in report["modules"]
        if name not in sys.stdlib_module_names and name not in KIT and not name.startswith("_")
    }  # fmt: skip
    assert third_party == {"click"}, third_party


@pytest.fixture
def declaration(tmp_path: Path) -> Path:
    """A passing privacy.json (the competition's configuration at epsilon 4, sigma 0.637)."""
    path = tmp_path / "privacy.json"
    path.write_text(json.dumps({
        "epsilon": 4, "delta": 1e-5, "noise_multiplier": 0.637, "clipping_norm": 0.5,
        "rounds": 5, "clients": 10, "clients_per_round": 2, "providers_per_round": 50,
        "min_providers": 400, "sampling": "poisson", "analysis": "competition",
        "unit": "provider",
    }))  # fmt: skip
    return path


def test_the_accounting_commands_compute_without_torch(declaration: Path) -> None:
    commands = [
        ["dp", "epsilon", "--noise-multiplier", "1", "--sample-rate", "0.1", "--steps", "10"],
        ["dp", "epsilon", "--noise-multiplier", "1", "--sample-rate", "0.1", "--steps", "10",
         "--json"],
        ["dp", "noise", "--epsilon", "8", "--sample-rate", "0.04", "--steps", "2000", "--json"],
        ["dp", "verify", str(declaration), "--json"],
    ]  # fmt: skip
    report = _run(json.dumps(commands))
    assert [run["code"] for run in report["runs"]] == [0, 0, 0, 0], report["runs"]
    assert _introduced_by(report, HEAVY) == {}
    assert not set(report["modules"]) & set(HEAVY)
    # The three accountants ran (opacus's RDP and PRV, dp-accounting's PLD), both libraries'
    # code from their files without their packages, and without scipy.stats and scipy.signal
    # (accountant.analysis.light_stats and light_signal stand in for them).
    epsilon = json.loads(report["runs"][1]["output"])["epsilon"]
    assert set(epsilon) == {"rdp", "prv", "pld"} and None not in epsilon.values()
    assert "accountant" in report["modules"] and "dp_accounting" not in report["modules"]
    assert not {"scipy.stats", "scipy.signal"} & set(report["scipy"]), report["scipy"]
    assert json.loads(report["runs"][3]["output"])["passed"] is True


def test_a_command_imports_its_own_command_module_only() -> None:
    report = _run(json.dumps([["dp", "epsilon", "--help"]]))
    loaded = set(report["modules"])
    assert {"accountant", "pflkit"} <= loaded
    assert not loaded & {"evaluator", "leaderboard", "baselines", "benchmark"}, loaded


def test_every_command_is_listed_under_its_own_name() -> None:
    import click

    from pflkit.cli import COMMANDS, main

    ctx = click.Context(main, info_name="pflkit")
    assert main.list_commands(ctx) == sorted(COMMANDS)
    for name in COMMANDS:
        command = main.get_command(ctx, name)
        assert command is not None and command.name == name, name
