"""The tutorials run as written: every ```bash block of a page under docs/tutorials/, in order,
in one shell (``set -euo pipefail``), in a fresh folder, with the kit's ``pflkit`` on the PATH.

A command that changes breaks this test, not the reader. The evaluator's port is replaced by a
free one; a service left running when a step fails is stopped with the shell's process group.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

TUTORIALS = Path(__file__).resolve().parents[2] / "docs" / "tutorials"
BLOCK = re.compile(r"^```bash\n(.*?)^```", re.DOTALL | re.MULTILINE)
PORT = "8765"


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


def test_every_tutorial_is_in_the_site_and_has_commands() -> None:
    nav = (TUTORIALS.parents[1] / "mkdocs.yml").read_text(encoding="utf-8")
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
    assert board.read_text().startswith("track,budget,rank,team,method,anls")
    assert "alpha" in board.read_text()
    assert (tmp_path / "competition" / "evaluator-backup").is_dir()
