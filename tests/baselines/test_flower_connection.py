"""`pflkit train --engine flower|flower-simulation` checks its SuperLink connection first.

Without the connection in ``$FLWR_HOME/config.toml``, or when nothing answers at its address,
the command fails before writing anything and says which command to start and which
``--federation`` to pass; a run that reached a SuperLink but never completed a round does not
suggest ``--resume``. Real ``.venv-flower/bin/pflkit`` processes with a temporary ``FLWR_HOME``
(``make flower-setup``; skipped without it).
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from baselines.flower.cli import write_connection
from baselines.flower.local import free_port
from tests.baselines.flower_runs import FLOWER_BIN, skip_without_flower

pytestmark = pytest.mark.flower

skip_without_flower()


@pytest.fixture
def flwr_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "flwr-home"
    monkeypatch.setenv("FLWR_HOME", str(home))
    return home


def _train(engine: str, out: Path, *options: str) -> subprocess.CompletedProcess:
    """``pflkit train`` from Flower's environment (``--num-clients``: no data is read first)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run(
        [str(FLOWER_BIN / "pflkit"), "train", "--engine", engine, "--preset", "lora",
         "--num-clients", "10", "--data", str(out.parent), "--out", str(out), *options],
        env=env, capture_output=True, text=True, timeout=600, check=False)


def test_simulation_without_a_superlink_says_what_to_start(flwr_home: Path,
                                                            tmp_path: Path) -> None:
    done = _train("flower-simulation", tmp_path / "run")

    assert done.returncode == 1
    message = " ".join(done.stderr.split())
    assert "no SuperLink connection 'local-simulation'" in message, message
    assert "nothing was started" in message
    assert "pflkit flower superlink --simulation` and pass `--federation local-simulation`" in message
    assert "--resume" not in message and "not found in the Flower configuration" not in message
    assert not (tmp_path / "run").exists()


def test_a_connection_that_does_not_answer_names_the_deployment_commands(
        flwr_home: Path, tmp_path: Path) -> None:
    port = free_port()
    write_connection("elsewhere", f"127.0.0.1:{port}", insecure=True)

    done = _train("flower", tmp_path / "run", "--federation", "elsewhere")

    assert done.returncode == 1
    message = " ".join(done.stderr.split())
    assert f"the SuperLink of connection 'elsewhere' (127.0.0.1:{port}" in message, message
    assert "does not answer, so nothing was started" in message
    assert "pflkit flower superlink` and one SuperNode per client organisation" in message
    assert "pflkit flower supernode --client K --data DIR`" in message
    assert "`--federation local-deployment`" in message
    assert not (tmp_path / "run").exists()


@pytest.fixture
def not_a_superlink() -> Iterator[int]:
    """A port where the kernel accepts connections and nobody speaks Flower's protocol."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield listener.getsockname()[1]


def test_a_run_that_never_started_does_not_suggest_resume(flwr_home: Path, tmp_path: Path,
                                                          not_a_superlink: int) -> None:
    write_connection("silent", f"127.0.0.1:{not_a_superlink}", insecure=True)

    done = _train("flower", tmp_path / "run", "--federation", "silent")

    assert done.returncode == 1
    message = " ".join(done.stderr.split())
    assert "ended before its first round was completed" in message, done.stdout + done.stderr
    assert "there is nothing to resume" in message and "--resume" not in message
    assert not (tmp_path / "run" / "state").exists()
