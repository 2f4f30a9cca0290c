"""Load benchmark of the status endpoint (``GET /api/v1/submissions/{id}``).

``python -m bench.loadtest`` starts a throw-away evaluator (``pflkit serve --no-worker`` in a
subprocess on a free localhost port, with a SQLite file or ``--db URL``), registers a team,
stores one finished submission with its transitions, then sends a bounded number of
authenticated status requests from ``--concurrency`` concurrent connections and reports
requests per second and latency percentiles. ``--server/--token/--submission`` measure a running
service instead. The client shares the machine's cores with the server, so the figure is a
lower bound for a server with its own machine.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import click


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _seed(database_url: str) -> tuple[str, str]:
    """A team and one finished submission; returns (token, submission id)."""
    from evaluator import crud
    from evaluator.core.db import migrate, session_scope
    from evaluator.models import Status

    migrate(database_url)
    with session_scope(database_url) as session:
        team, token = crud.create_team(session, name=f"loadtest-{os.getpid()}-{time.time_ns()}")
        submission = crud.reserve_submission(
            session,
            team_id=team.id,
            quota=10**6,
            track=1,
            method="fedavg",
            metadata={"track": 1, "method": "fedavg"},
        )
        submission_id = submission.id
    with session_scope(database_url) as session:
        crud.transition(
            session,
            submission_id=submission_id,
            from_status=Status.RECEIVED,
            to_status=Status.QUEUED,
        )
        crud.claim(session, submission_id=submission_id, worker="loadtest", lease_seconds=60)
        crud.transition(
            session,
            submission_id=submission_id,
            from_status=Status.SCORING,
            to_status=Status.FINISHED,
            lease_owner="loadtest",
            values={
                "anls": 0.5,
                "accuracy": 0.4,
                "total_bytes": 123456,
                "bytes_up": 61728,
                "bytes_down": 61728,
                "rounds": 2,
                "per_round": [
                    {
                        "round": r,
                        "up": 30864,
                        "down": 30864,
                        "total": 61728,
                        "clients": 2,
                        "messages": 4,
                    }
                    for r in range(2)
                ],
            },
        )
    return token, submission_id


async def _get(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> int:
    """One keep-alive HTTP/1.1 GET on an open connection; returns the status code."""
    writer.write(request)
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    await reader.readexactly(length)
    return status


async def _hammer(
    url: str, token: str, *, requests: int, concurrency: int
) -> tuple[list[float], Counter[str], float]:
    """Send ``requests`` GETs over ``concurrency`` keep-alive connections.

    A minimal HTTP/1.1 client (raw asyncio streams) keeps the load generator's own CPU use
    small, since it shares the machine with the server.

    Returns:
        Latencies, error kinds and wall time.
    """
    parts = urlsplit(url)
    request = (
        f"GET {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        f"Authorization: Bearer {token}\r\nConnection: keep-alive\r\n\r\n"
    ).encode()
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    remaining = requests

    async def worker() -> None:
        nonlocal remaining
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port or 80)
        try:
            while remaining > 0:
                remaining -= 1
                started = time.perf_counter()
                try:
                    status = await _get(reader, writer, request)
                    if status != 200:
                        errors[f"HTTP {status}"] += 1
                except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
                    errors[type(exc).__name__] += 1
                    writer.close()
                    reader, writer = await asyncio.open_connection(parts.hostname, parts.port or 80)
                latencies.append(time.perf_counter() - started)
        finally:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, errors, time.perf_counter() - started


def _wait_healthy(url: str, process: subprocess.Popen, timeout: float = 60) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise click.ClickException("the evaluator exited during start-up")
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise click.ClickException("the evaluator did not become healthy")


@click.command()
@click.option("--requests", "total", default=3000, show_default=True, help="requests to send")
@click.option("--concurrency", default=32, show_default=True, help="concurrent connections")
@click.option("--api-workers", default=1, show_default=True, help="uvicorn processes of the server")
@click.option("--db", "database_url", default=None, help="database of the throw-away server")
@click.option("--server", default=None, help="measure this running service instead")
@click.option("--token", default=None, help="token for --server")
@click.option("--submission", default=None, help="submission id for --server")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
def main(
    total: int,
    concurrency: int,
    api_workers: int,
    database_url: str | None,
    server: str | None,
    token: str | None,
    submission: str | None,
    as_json: bool,
) -> None:
    """Measure requests/s of the status endpoint under concurrent load."""
    process = None
    scratch = tempfile.TemporaryDirectory(prefix="pflkit-loadtest-")
    try:
        if server is None:
            storage = Path(scratch.name)
            database_url = database_url or f"sqlite:///{storage / 'evaluator.db'}"
            token, submission = _seed(database_url)
            port = _free_port()
            server = f"http://127.0.0.1:{port}"
            env = {**os.environ, "PFLKIT_EVALUATOR_LOG_LEVEL": "WARNING"}
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "pflkit",
                    "serve",
                    "--no-worker",
                    "--port",
                    str(port),
                    "--db",
                    database_url,
                    "--storage",
                    str(storage),
                    "--workers",
                    str(api_workers),
                ],
                env=env,
            )
            _wait_healthy(server, process)
        elif not (token and submission):
            raise click.UsageError("--server needs --token and --submission")
        url = f"{server.rstrip('/')}/api/v1/submissions/{submission}"
        latencies, errors, wall = asyncio.run(
            _hammer(url, token, requests=total, concurrency=concurrency)
        )
    finally:
        if process is not None:
            process.terminate()
            process.wait(timeout=30)
        scratch.cleanup()
    latencies.sort()
    result = {
        "endpoint": "GET /api/v1/submissions/{id}",
        "requests": total,
        "concurrency": concurrency,
        "errors": sum(errors.values()),
        "error_kinds": dict(errors),
        "seconds": round(wall, 3),
        "requests_per_second": round(total / wall, 1),
        "latency_ms_p50": round(1000 * statistics.median(latencies), 2),
        "latency_ms_p95": round(1000 * latencies[int(0.95 * (len(latencies) - 1))], 2),
        "latency_ms_p99": round(1000 * latencies[int(0.99 * (len(latencies) - 1))], 2),
        "api_workers": api_workers if process is not None else None,
        "database": (database_url or "external").split(":", 1)[0],
    }
    if as_json:
        click.echo(json.dumps(result))
    else:
        for key, value in result.items():
            click.echo(f"{key:>22}: {value}")


if __name__ == "__main__":
    main()
