"""Load benchmark of the status endpoint (``GET /api/v1/submissions/{id}``), during uploads.

``python -m bench.loadtest`` starts a throw-away evaluator (``pflkit serve --no-worker`` in a
subprocess on a free localhost port, with a SQLite file or ``--db URL``), registers a team,
stores one finished submission with its transitions, then, for each ``--concurrency`` level,
sends a bounded number of authenticated status requests from that many concurrent connections
while ``--uploaders`` clients keep uploading valid submissions, and reports requests per second,
latency percentiles, errors and the uploads accepted. ``--wrk SECONDS`` measures each level
again with wrk (an independent load generator, ``apt-get install wrk``), uploads running too.
``--server/--token/--submission`` measure a running service instead (no uploads). The client
shares the machine's cores with the server, so the figure is a lower bound for a server with
its own machine.
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


def seed(database_url: str) -> tuple[str, str]:
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


def _upload_parts(seed: int, number: int) -> dict[str, tuple[str, bytes, str]]:
    """A small valid track-1 submission whose checkpoint differs for every (seed, number)."""
    import numpy as np
    from safetensors.numpy import save

    tensors = {
        "a.weight": np.random.default_rng([seed, number]).standard_normal((64, 64), np.float32)
    }
    log = ["federated_round,sender,receiver,amount_of_bytes"]
    for r in range(2):
        log += [f"{r},-1,{c},16384" for c in (0, 1)] + [f"{r},{c},-1,16384" for c in (0, 1)]
    meta = {"track": 1, "method": "loadtest", "clients": 10, "clients_per_round": 2, "rounds": 2}
    details = b"".join(
        json.dumps(dict(zip(log[0].split(","), map(int, row.split(",")), strict=True))
                   | {"format": "fp32", "parameters": []}).encode() + b"\n"
        for row in log[1:]
    )  # fmt: skip
    return {
        "model": ("model.safetensors", save(tensors), "application/octet-stream"),
        "communication_log": ("communication_log.csv", "\n".join(log).encode() + b"\n", "text/csv"),
        "communication_details": ("communication_log.jsonl", details, "application/jsonl"),
        "metadata": ("submission.json", json.dumps(meta).encode(), "application/json"),
    }


async def _upload_until(
    server: str, token: str, seed: int, stop: asyncio.Event, outcome: Counter[str]
) -> None:
    """Upload submissions one after another until ``stop`` is set; count the answers."""
    import httpx

    number = 0
    async with httpx.AsyncClient(base_url=server, timeout=60) as client:
        while not stop.is_set():
            number += 1
            try:
                response = await client.post(
                    "/api/v1/submissions",
                    files=_upload_parts(seed, number),
                    headers={"Authorization": f"Bearer {token}"},
                )
                outcome["accepted" if response.status_code == 202 else f"HTTP {response.status_code}"] += 1
            except httpx.HTTPError as exc:
                outcome[type(exc).__name__] += 1


class Uploads:
    """``count`` clients uploading in the background of a measurement (``async with``)."""

    def __init__(self, server: str, tokens: list[str]) -> None:
        self.server, self.tokens = server, tokens
        self.outcome: Counter[str] = Counter()
        self.round = 0

    async def __aenter__(self) -> Uploads:
        self.round += 1
        self.outcome = Counter()
        self.stop = asyncio.Event()
        self.tasks = [
            asyncio.create_task(
                _upload_until(self.server, token, 1000 * self.round + i, self.stop, self.outcome)
            )
            for i, token in enumerate(self.tokens)
        ]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop.set()
        await asyncio.gather(*self.tasks)


def _parse_wrk(output: str) -> dict[str, object]:
    """Requests/s, requests, errors (non-2xx and socket errors) and latency from wrk's output."""
    import re

    requests = re.search(r"(\d+) requests in", output)
    rate = re.search(r"Requests/sec:\s+([\d.]+)", output)
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    sockets = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output
    )
    latency = dict(re.findall(r"^\s+(50|99)%\s+(\S+)$", output, re.MULTILINE))
    return {
        "requests": int(requests.group(1)) if requests else None,
        "requests_per_second": float(rate.group(1)) if rate else None,
        "errors": (int(non_2xx.group(1)) if non_2xx else 0)
        + (sum(int(g) for g in sockets.groups()) if sockets else 0),
        "latency_p50": latency.get("50"),
        "latency_p99": latency.get("99"),
    }


async def _wrk(url: str, token: str, *, connections: int, seconds: int) -> dict[str, object]:
    """Run wrk (2 threads) against ``url`` and parse its report (skipped when not installed)."""
    import shutil

    if shutil.which("wrk") is None:
        return {"tool": "wrk", "skipped": "wrk is not installed (apt-get install wrk)"}
    process = await asyncio.create_subprocess_exec(
        "wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--timeout", "10s", "--latency",
        "-H", f"Authorization: Bearer {token}", url,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    output, _ = await process.communicate()
    return {"tool": "wrk 4.1.0", "seconds": seconds, **_parse_wrk(output.decode())}


async def _measure(
    url: str, token: str, uploads: Uploads | None, *, requests: int, concurrency: int,
    wrk_seconds: int,
) -> dict[str, object]:  # fmt: skip
    """One concurrency level: the built-in client, then wrk, each during uploads."""
    async with uploads or _nothing():
        latencies, errors, wall = await _hammer(
            url, token, requests=requests, concurrency=concurrency
        )
    latencies.sort()
    result: dict[str, object] = {
        "concurrency": concurrency,
        "requests": requests,
        "errors": sum(errors.values()),
        "error_kinds": dict(errors),
        "seconds": round(wall, 3),
        "requests_per_second": round(requests / wall, 1),
        "latency_ms_p50": round(1000 * statistics.median(latencies), 2),
        "latency_ms_p95": round(1000 * latencies[int(0.95 * (len(latencies) - 1))], 2),
        "latency_ms_p99": round(1000 * latencies[int(0.99 * (len(latencies) - 1))], 2),
        "uploads": dict(uploads.outcome) if uploads else None,
    }
    if wrk_seconds:
        async with uploads or _nothing():
            result["wrk"] = await _wrk(url, token, connections=concurrency, seconds=wrk_seconds)
        result["wrk"]["uploads"] = dict(uploads.outcome) if uploads else None
    return result


class _nothing:
    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        return None


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


def _start_server(database_url: str, storage: Path, api_workers: int) -> tuple[str, subprocess.Popen]:
    """``pflkit serve --no-worker`` on a free port, healthy; returns its URL and process."""
    port = _free_port()
    server = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "PFLKIT_EVALUATOR_LOG_LEVEL": "WARNING",
        "PFLKIT_EVALUATOR_DAILY_QUOTA": "10000",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "pflkit", "serve", "--no-worker", "--port", str(port),
         "--db", database_url, "--storage", str(storage), "--workers", str(api_workers)],
        env=env,
    )  # fmt: skip
    _wait_healthy(server, process)
    return server, process


def _uploader_tokens(database_url: str, count: int) -> list[str]:
    """Tokens of ``count`` fresh uploading teams."""
    from evaluator import crud
    from evaluator.core.db import session_scope

    tokens = []
    with session_scope(database_url) as session:
        for i in range(count):
            name = f"uploader-{os.getpid()}-{time.time_ns() % 10**9}-{i}"
            tokens.append(crud.create_team(session, name=name)[1])
    return tokens


def _levels(value: str) -> list[int]:
    try:
        levels = [int(v) for v in value.split(",")]
    except ValueError:
        raise click.BadParameter("give concurrency levels like 100,200") from None
    if not levels or min(levels) < 1:
        raise click.BadParameter("concurrency levels must be positive")
    return levels


@click.command()
@click.option("--requests", "total", default=3000, show_default=True, help="requests per level")
@click.option("--concurrency", default="32", show_default=True,
              help="concurrent connections; several levels as 100,200")  # fmt: skip
@click.option("--uploaders", default=0, show_default=True,
              help="clients uploading submissions during each measurement")  # fmt: skip
@click.option("--wrk", "wrk_seconds", default=0, show_default=True,
              help="also run wrk for this many seconds per level (0: not)")  # fmt: skip
@click.option("--api-workers", default=1, show_default=True, help="uvicorn processes of the server")
@click.option("--db", "database_url", default=None, help="database of the throw-away server")
@click.option("--server", default=None, help="measure this running service instead")
@click.option("--token", default=None, help="token for --server")
@click.option("--submission", default=None, help="submission id for --server")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object per level")
def main(
    total: int,
    concurrency: str,
    uploaders: int,
    wrk_seconds: int,
    api_workers: int,
    database_url: str | None,
    server: str | None,
    token: str | None,
    submission: str | None,
    as_json: bool,
) -> None:
    """Measure requests/s of the status endpoint under concurrent load, during uploads."""
    levels = _levels(concurrency)
    process = None
    scratch = tempfile.TemporaryDirectory(prefix="pflkit-loadtest-")
    results = []
    try:
        if server is None:
            storage = Path(scratch.name)
            database_url = database_url or f"sqlite:///{storage / 'evaluator.db'}"
            token, submission = seed(database_url)
            tokens = _uploader_tokens(database_url, uploaders)
            server, process = _start_server(database_url, storage, api_workers)
        elif not (token and submission):
            raise click.UsageError("--server needs --token and --submission")
        else:
            tokens = []
        uploads = Uploads(server, tokens) if tokens else None
        url = f"{server.rstrip('/')}/api/v1/submissions/{submission}"
        for level in levels:
            results.append(
                asyncio.run(
                    _measure(url, token, uploads, requests=total, concurrency=level,
                             wrk_seconds=wrk_seconds)  # fmt: skip
                )
            )
    finally:
        if process is not None:
            process.terminate()
            process.wait(timeout=30)
        scratch.cleanup()
    common = {
        "endpoint": "GET /api/v1/submissions/{id}",
        "api_workers": api_workers if process is not None else None,
        "database": (database_url or "external").split(":", 1)[0],
        "uploaders": uploaders,
    }
    for result in results:
        if as_json:
            click.echo(json.dumps({**common, **result}))
            continue
        for key, value in {**common, **result}.items():
            click.echo(f"{key:>22}: {value}")
        click.echo("")


if __name__ == "__main__":
    main()
