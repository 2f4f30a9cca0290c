"""Schemathesis over the evaluator's OpenAPI spec, as a participant and as an organiser.

``python -m bench.apifuzz [--max-examples 100]`` starts a throw-away evaluator
(``pflkit serve --no-worker``, SQLite), registers a participant and an organiser, and runs
``st run`` (schemathesis, a dev dependency) against ``/openapi.json`` with each token,
checking that no request gets a 5xx. It prints the requests sent and the server errors found
per role (a minute or more: not part of ``make test``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import click

from bench.loadtest import _start_server


def _tokens(database_url: str) -> dict[str, str]:
    from evaluator import crud
    from evaluator.core.db import migrate, session_scope

    migrate(database_url)
    with session_scope(database_url) as session:
        return {
            "participant": crud.create_team(session, name="fuzz-participant")[1],
            "organiser": crud.create_team(session, name="fuzz-organiser", organiser=True)[1],
        }


def _fuzz(server: str, token: str, max_examples: int, report: Path) -> dict[str, int]:
    """One schemathesis run; the requests it sent and the 5xx answers among them."""
    command = [
        str(Path(sys.executable).with_name("st")), "run", f"{server}/openapi.json",
        "-H", f"Authorization: Bearer {token}", "--checks", "not_a_server_error",
        "--max-examples", str(max_examples), "--seed", "0", "--continue-on-failure",
        "--report", "ndjson", "--report-ndjson-path", str(report), "--request-timeout", "30",
    ]  # fmt: skip
    output = subprocess.run(command, capture_output=True, text=True, check=False)
    requests = server_errors = 0
    for line in report.read_text().splitlines():
        for status in _statuses(json.loads(line)):
            requests += 1
            server_errors += status >= 500
    if output.returncode not in (0, 1):
        raise click.ClickException(output.stdout[-2000:] + output.stderr[-2000:])
    return {"requests": requests, "server_errors": server_errors, "st_exit": output.returncode}


def _statuses(event: dict) -> list[int]:
    """Status codes of the requests a finished scenario recorded (one per interaction)."""
    recorder = event.get("ScenarioFinished", {}).get("recorder", {})
    return [
        (interaction.get("response") or {}).get("status_code", 0)
        for interaction in (recorder.get("interactions") or {}).values()
    ]


@click.command()
@click.option("--max-examples", default=100, show_default=True, help="examples per operation")
def main(max_examples: int) -> None:
    """Fuzz the API as a participant and an organiser; print requests and server errors."""
    os.environ["PFLKIT_EVALUATOR_AUTH_FAILURES_ALLOWED"] = "10000"
    with tempfile.TemporaryDirectory(prefix="pflkit-apifuzz-") as scratch:
        storage = Path(scratch)
        database_url = f"sqlite:///{storage / 'evaluator.db'}"
        tokens = _tokens(database_url)
        server, process = _start_server(database_url, storage, api_workers=1)
        try:
            for role, token in tokens.items():
                figures = _fuzz(server, token, max_examples, storage / f"{role}.ndjson")
                click.echo(json.dumps({"role": role, "max_examples": max_examples, **figures}))
        finally:
            process.terminate()
            process.wait(timeout=30)


if __name__ == "__main__":
    main()
