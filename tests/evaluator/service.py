"""The evaluator's commands run as real subprocesses on localhost, for the end-to-end tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.evaluator.conftest import free_port


def pflkit(
    *args: str, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess:
    """Run one `pflkit` command and return its completed process."""
    return subprocess.run(
        [sys.executable, "-m", "pflkit", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
        check=False,
    )


def create_team(database_url: str, name: str, *, organiser: bool = False) -> str:
    """`pflkit team create NAME --db URL --json`; returns the token."""
    result = pflkit(
        "team",
        "create",
        name,
        "--db",
        database_url,
        "--json",
        *(["--organiser"] if organiser else []),
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["token"]


class Process:
    """A long-running `pflkit` command with its output in a log file."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str]) -> None:
        self.log = log
        self._handle = log.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pflkit", *args],
            stdout=self._handle,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env},
            start_new_session=True,
        )

    def kill(self) -> None:
        """SIGKILL the process and everything it started (as a crash would)."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 30 s."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        self._handle.close()

    def output(self) -> str:
        """Everything the process printed so far."""
        if not self._handle.closed:
            self._handle.flush()
        return self.log.read_text(errors="replace")


class Service(Process):
    """`pflkit serve` on a free localhost port."""

    def __init__(self, log: Path, env: dict[str, str], *extra: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        super().__init__(["serve", "--port", str(self.port), *extra], log, env)

    def wait_healthy(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.output()
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"service not healthy:\n{self.output()}")


def service_env(
    tmp_path: Path,
    *,
    reference: Path,
    data: Path,
    database_url: str,
    queue_url: str | None = None,
    queue_name: str | None = None,
) -> dict[str, str]:
    """Environment of the service and its workers: the settings the tests need."""
    env = {
        "PFLKIT_EVALUATOR_DATABASE_URL": database_url,
        "PFLKIT_EVALUATOR_STORAGE_DIR": str(tmp_path / "storage"),
        "PFLKIT_EVALUATOR_DATA_DIR": str(data),
        "PFLKIT_EVALUATOR_REFERENCE_MODEL": str(reference),
        "PFLKIT_EVALUATOR_LEASE_SECONDS": "3",
        "PFLKIT_EVALUATOR_REAP_INTERVAL_SECONDS": "0.5",
        "PFLKIT_EVALUATOR_RETRY_DELAY_SECONDS": "0",
        "PFLKIT_EVALUATOR_BATCH_SIZE": "8",
        "PFLKIT_EVALUATOR_TORCH_THREADS": "1",
        "PFLKIT_EVALUATOR_LOG_LEVEL": "INFO",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    if queue_url:
        env["PFLKIT_EVALUATOR_QUEUE_URL"] = queue_url
    if queue_name:
        env["PFLKIT_EVALUATOR_QUEUE_NAME"] = queue_name
    return env


def poll(
    url: str, token: str, *, until: set[str], timeout: float = 300, interval: float = 0.05
) -> dict:
    """GET a submission until its status is in ``until``."""
    deadline = time.monotonic() + timeout
    with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=10) as client:
        while time.monotonic() < deadline:
            body = client.get(url).json()
            if body["status"] in until:
                return body
            time.sleep(interval)
    raise AssertionError(f"{url} never reached {until}; last {body}")
