"""The tutorials and the how-to guides run as written: every ```bash block of a page under
docs/tutorials/ or docs/how-to/, in order, in one shell (``set -euo pipefail``), in a fresh
folder, with the kit's ``pflkit`` on the PATH.

A command that changes breaks this test, not the reader. The evaluator's port is replaced by a
free one; a service left running when a step fails is stopped with the shell's process group.
A guide that writes a file of the kit (a ```python block titled with its path) runs in a copy of
the kit's packages, put first on ``PYTHONPATH``. A ```shell block shows what needs more than the
test machine has (a GPU, Flower's environment, hours): it is not run, but the ``pflkit``
commands, ``make`` targets and ``python -m`` modules it names, and those of every inline
``pflkit ...`` on these pages, are checked to exist, with every option against ``--help``.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TUTORIALS = ROOT / "docs" / "tutorials"
HOW_TO = ROOT / "docs" / "how-to"
BLOCK = re.compile(r"^```bash\n(.*?)^```", re.DOTALL | re.MULTILINE)
COMMAND_BLOCK = re.compile(r"^```(?:bash|shell)\n(.*?)^```", re.DOTALL | re.MULTILINE)
FILE_BLOCK = re.compile(r'^```python title="([^"]+)"\n(.*?)^```', re.DOTALL | re.MULTILINE)
INLINE_COMMAND = re.compile(r"`(pflkit [^`]+)`")
PORT = "8765"
#: the kit's packages, copied for a guide that adds a file to one of them
KIT_PACKAGES = ("accountant", "baselines", "benchmark", "evaluator", "leaderboard", "pflkit")
#: options a guide adds to the kit itself, so that the kit's --help cannot list them
OPTIONS_A_GUIDE_ADDS = {"add-a-method.md": {"--smoothing-factor"}}


def shell_blocks(page: Path) -> list[str]:
    """The page's ```bash blocks, in order (other fences are shown, not run)."""
    return BLOCK.findall(page.read_text(encoding="utf-8"))


def _free_port() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return str(probe.getsockname()[1])


def run_tutorial(page: Path, folder: Path, timeout: float = 900,
                 replace: dict[str, str] | None = None,
                 env: dict[str, str] | None = None) -> subprocess.CompletedProcess:  # fmt: skip
    """Run a page's blocks as one script in ``folder`` (``replace``: text substituted in the
    script, such as a database name); the completed process."""
    script = "set -euo pipefail\n" + "\n".join(shell_blocks(page)).replace(PORT, _free_port())
    for old, new in (replace or {}).items():
        script = script.replace(old, new)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **(env or {})}  # fmt: skip
    shell = subprocess.Popen(["bash", "-c", script], cwd=folder, env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)  # fmt: skip
    try:
        output, _ = shell.communicate(timeout=timeout)
    finally:
        try:
            os.killpg(shell.pid, signal.SIGTERM)  # a background service the script left
        except ProcessLookupError:
            pass
    return subprocess.CompletedProcess(shell.args, shell.returncode, output, "")


def file_blocks(page: Path) -> list[tuple[str, str]]:
    """The page's ```python blocks titled with the path of a file of the kit: (path, text)."""
    return FILE_BLOCK.findall(page.read_text(encoding="utf-8"))


def copy_of_the_kit(folder: Path) -> Path:
    """The kit's packages copied into ``folder`` (caches left out); the copy's root."""
    for package in KIT_PACKAGES:
        shutil.copytree(ROOT / package, folder / package,
                        ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    return folder


def run_how_to(page: Path, folder: Path) -> subprocess.CompletedProcess:
    """Run a guide's blocks in ``folder``, or, when the guide writes files of the kit, in a copy
    of the kit holding them, first on ``PYTHONPATH``."""
    files = file_blocks(page)
    if not files:
        return run_tutorial(page, folder)
    kit = copy_of_the_kit(folder / "kit")
    for path, text in files:
        (kit / path).write_text(text, encoding="utf-8")
    path = os.pathsep.join(filter(None, (str(kit), os.environ.get("PYTHONPATH"))))
    return run_tutorial(page, kit, env={"PYTHONPATH": path})


def test_every_tutorial_is_in_the_site_and_has_commands() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = sorted(TUTORIALS.glob("*.md"))
    assert pages
    for page in pages:
        assert f"tutorials/{page.name}" in nav, f"{page.name} is not in mkdocs.yml's nav"
        assert shell_blocks(page), f"{page.name} has no ```bash block"


def test_your_first_submission(tmp_path: Path) -> None:
    result = run_tutorial(TUTORIALS / "first-submission.md", tmp_path)
    assert result.returncode == 0, result.stdout[-6000:]
    out = result.stdout
    assert re.search(r"^submission [0-9a-f-]{36} finished$", out, re.MULTILINE), out[-3000:]
    assert "refused the submission (422): communication_details: line 1 is 1,-1,4,7666240" in out
    assert "refused\n" in out  # the tutorial's `|| echo "refused"`
    assert "Track 1: fewest bytes at test ANLS >= 0.8242" in out
    assert '"anls":' in out  # pflkit evaluate --json


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.timeout(1500)
def test_run_a_competition(tmp_path: Path) -> None:
    from tests.evaluator.conftest import _postgres_available

    if not _postgres_available():
        pytest.skip("PostgreSQL is not running on 127.0.0.1:5432")
    try:
        socket.create_connection(("127.0.0.1", 6379), timeout=1).close()
    except OSError:
        pytest.skip("Redis is not running on 127.0.0.1:6379")
    database = f"pflkit_tutorial_{uuid.uuid4().hex[:12]}"
    try:
        result = run_tutorial(TUTORIALS / "run-a-competition.md", tmp_path, timeout=1400,
                              replace={"pflkit_tutorial": database},
                              env={"PFLKIT_EVALUATOR_QUEUE_NAME": database})  # fmt: skip
    finally:
        subprocess.run(["dropdb", "--if-exists", "-h", "127.0.0.1", "-U", "postgres", database],
                       check=False, capture_output=True)  # fmt: skip
    assert result.returncode == 0, result.stdout[-6000:]
    out = result.stdout
    assert "track1_threshold 0.2658 written to benchmark/benchmark.json" in out
    assert re.search(r"^submission [0-9a-f-]{36} finished$", out, re.MULTILINE), out[-3000:]
    board = tmp_path / "competition" / "leaderboard.csv"
    assert board.read_text().startswith("track,budget,rank,team,method,family,anls")
    assert "alpha" in board.read_text()
    assert (tmp_path / "competition" / "evaluator-backup").is_dir()


def test_every_how_to_guide_is_in_the_site() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = sorted(HOW_TO.glob("*.md"))
    assert len(pages) > 1
    for page in pages:
        assert f"how-to/{page.name}" in nav, f"{page.name} is not in mkdocs.yml's nav"


#: the figures the pages quote (docs/hooks/reference_figures.py): name -> value as displayed
FIGURES = {row["name"]: row["value"] for row in json.loads(
    (ROOT / "docs/results/data/reference_figures.json").read_text(encoding="utf-8"))["rows"]}  # fmt: skip

#: what a guide's run must print, beside ending with status 0
HOW_TO_OUTPUT = {
    "make-a-dp-claim.md": ("0.5375", "PASS declared epsilon 8", "FAIL declared epsilon 4",
                           "not verified\n"),
    "train-on-a-gpu.md": ('"device": "cpu"', '"precision": "bf16"', '"optimizer": "adamw8bit"'),
    "add-a-method.md": ("--smoothing-factor", '"factor": 0.05', "baselines/methods/label_smoothing.py"),
    "reproduce-a-figure.md": (f"\n{FIGURES['base_val_anls']}\n",),
}  # fmt: skip


#: guides whose run takes a minute or more (the `mini` benchmark): in ``make test-slow``
SLOW_GUIDES = {"reproduce-a-figure.md"}


@pytest.mark.parametrize("guide", [
    pytest.param(page.name, marks=[pytest.mark.slow] if page.name in SLOW_GUIDES else [])
    for page in sorted(HOW_TO.glob("*.md")) if shell_blocks(page)])  # fmt: skip
def test_a_how_to_guide_runs(guide: str, tmp_path: Path) -> None:
    result = run_how_to(HOW_TO / guide, tmp_path)
    assert result.returncode == 0, result.stdout[-6000:]
    for expected in HOW_TO_OUTPUT.get(guide, ()):
        assert expected in result.stdout, (expected, result.stdout[-3000:])


def command_lines(page: Path) -> list[str]:
    """A page's shell command lines (continuations joined) and its inline `pflkit ...`."""
    text = page.read_text(encoding="utf-8")
    lines = [line for block in COMMAND_BLOCK.findall(text)
             for line in block.replace("\\\n", " ").splitlines()]  # fmt: skip
    return lines + INLINE_COMMAND.findall(text)


def invocations(tokens: list[str], program: str) -> list[list[str]]:
    """The arguments of every call of ``program`` on one shell line (pipes, ``$(...)``, paths
    such as ``.venv-flower/bin/pflkit`` and redirections understood)."""
    calls: list[list[str]] = []
    current: list[str] | None = None
    for token in tokens:
        if current is not None and (token in {"|", "||", "&&", ";", "&"} or token[0] in "<>"
                                    or token.startswith("2>")):  # fmt: skip
            calls.append(current)
            current = None
        elif current is not None:
            current.append(token.rstrip(")"))
        elif re.fullmatch(rf"(.*[=(/])?{program}", token):
            current = []
    return calls if current is None else [*calls, current]


@functools.cache
def help_text(path: tuple[str, ...]) -> str:
    """``pflkit PATH --help``."""
    result = subprocess.run([sys.executable, "-m", "pflkit", *path, "--help"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0, (path, result.stderr[-2000:])
    return result.stdout


def pflkit_problems(args: list[str], added: set[str]) -> list[str]:
    """What is wrong with one call of pflkit: an unknown command or option (empty: nothing)."""
    import click

    from pflkit.cli import main

    command: click.Command = main
    path: list[str] = []
    for arg in args:
        if not isinstance(command, click.Group) or arg.startswith("-"):
            break
        sub = command.get_command(click.Context(command), arg)
        if sub is None:
            return [f"pflkit {' '.join(path)}: no command {arg!r}"]
        command, path = sub, [*path, arg]
    options = [arg.split("=")[0] for arg in args[: args.index("--") if "--" in args else None]
               if arg.startswith("--")]  # fmt: skip
    text = help_text(tuple(path))
    return [f"pflkit {' '.join(path)}: no option {option}" for option in options
            if option not in added and not re.search(rf"(?<![\w-]){option}(?![\w-])", text)]  # fmt: skip


def other_problems(tokens: list[str]) -> list[str]:
    """An unknown ``make`` target or ``python -m`` module on one shell line."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    problems = [f"make: no target {target}" for call in invocations(tokens, "make")
                for target in call if "=" not in target and not target.startswith("-")
                and not re.search(rf"^{re.escape(target)}:", makefile, re.MULTILINE)]  # fmt: skip
    modules = [tokens[i + 2] for i in range(len(tokens) - 2)
               if tokens[i].endswith("python") and tokens[i + 1] == "-m"]  # fmt: skip
    return problems + [f"python -m: no module {module}" for module in modules
                       if not module_exists(module)]  # fmt: skip


def module_exists(name: str) -> bool:
    """Whether ``python -m name`` finds a module from the repository's root."""
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


@pytest.mark.parametrize("page", sorted([*TUTORIALS.glob("*.md"), *HOW_TO.glob("*.md")]),
                         ids=lambda page: page.name)  # fmt: skip
def test_every_command_a_guide_names_exists(page: Path) -> None:
    added = OPTIONS_A_GUIDE_ADDS.get(page.name, set())
    problems = []
    for line in command_lines(page):
        tokens = shlex.split(line, comments=True)
        problems += other_problems(tokens)
        for args in invocations(tokens, "pflkit"):
            problems += pflkit_problems(args, added)
    assert not problems, problems
