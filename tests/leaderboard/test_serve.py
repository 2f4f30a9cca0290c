"""`pflkit serve` serves the leaderboard from the evaluator's app by default."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx

from tests.leaderboard.conftest import _free_port


def _get(url: str, deadline: float) -> httpx.Response:
    while True:
        try:
            return httpx.get(url, timeout=5)
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_pflkit_serve_serves_the_leaderboard_unless_told_not_to(tmp_path):
    for flag, expected in (("--leaderboard", 200), ("--no-leaderboard", 404)):
        port = _free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "pflkit", "serve", "--no-worker", "--storage", str(tmp_path / flag),
             "--port", str(port), flag],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            env={**os.environ, "PFLKIT_EVALUATOR_LOG_LEVEL": "WARNING"},
        )  # fmt: skip
        try:
            response = _get(f"http://127.0.0.1:{port}/leaderboard", time.monotonic() + 60)
            assert response.status_code == expected
            if expected == 200:
                assert "no ranked submission yet" in response.text
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)
