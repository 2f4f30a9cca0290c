"""Load benchmark of the polled endpoints (status, leaderboard page and JSON), during uploads.

``python -m bench.loadtest`` starts a throw-away evaluator (``pflkit serve`` in a subprocess on a
free localhost port, with a SQLite file or ``--db URL``), registers a team, stores one finished
submission with its transitions, then, for each ``--concurrency`` level, sends a bounded number of
GETs from that many concurrent keep-alive connections while ``--uploaders`` clients keep
uploading valid submissions, and reports requests per second, latency percentiles (p50, p95,
p99) overall and per endpoint, errors and the uploads accepted.

``--endpoints`` picks what the readers ask for, each connection in turn (``status``: the
authenticated ``GET /api/v1/submissions/{id}``, the default; ``page``: ``GET /leaderboard``;
``json``: ``GET /api/v1/leaderboard?track=1``). ``--data DIR`` runs the server's embedded scoring
worker on that benchmark (default: ``--no-worker``) and uploads the shipped base checkpoint with
one tensor changed per upload (declared in the detailed log), so the uploads are scored while
the readers read: the uploads start once the worker is ready and run through every level, the
first level starts once the worker scores the first upload (the uploads outpace the worker, so
it stays busy), and each level reports the submissions that reached a final state meanwhile.
``--revalidate`` makes the readers poll as browsers and ``pflkit submit --wait`` do, with
``If-None-Match`` and the ETag of their last answer (a 304 counts as answered). ``--wrk SECONDS`` measures the status endpoint again with wrk (an independent load
generator, ``apt-get install wrk``), uploads running too. ``--server/--token/--submission``
measure a running service instead (no uploads). The client shares the machine's cores with the
server, so the figures are bounds for a server with its own machine.

``--record PATH`` adds the run to that results table's data file (``docs/results/data/load.json``,
:data:`TABLE_COLUMNS`): one row per level, the first named ``--label`` with the load average at
the run's start and end.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import click

from experiments.results_file import Column, append_results_rows, command_line, number, text


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def seed(database_url: str) -> tuple[str, str]:
    """A team and one finished submission; returns (token, submission id)."""
    from evaluator import crud
    from evaluator.core.db import migrate, session_scope
    from evaluator.tables import Status

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


#: the endpoints a reader may ask for (``--endpoints``): name -> path (``{id}``: the seeded
#: submission)
ENDPOINTS = {
    "status": "/api/v1/submissions/{id}",
    "page": "/leaderboard",
    "json": "/api/v1/leaderboard?track=1",
}


async def _get(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
) -> tuple[int, bytes | None]:
    """One keep-alive HTTP/1.1 GET on an open connection; returns the status code and ETag."""
    writer.write(request)
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length, etag = 0, None
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"etag":
            etag = value.strip()
    await reader.readexactly(length)
    return status, etag


def _percentiles(latencies: list[float]) -> dict[str, float | None]:
    """p50, p95 and p99 in milliseconds (None without any request)."""
    if not latencies:
        return {"p50_ms": None, "p95_ms": None, "p99_ms": None}
    ordered = sorted(latencies)

    def at(q: float) -> float:
        return round(1000 * ordered[int(q * (len(ordered) - 1))], 2)

    return {"p50_ms": round(1000 * statistics.median(ordered), 2), "p95_ms": at(0.95),
            "p99_ms": at(0.99)}  # fmt: skip


class Tally:
    """Latencies, errors and 304s of one endpoint."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.errors: Counter[str] = Counter()
        self.not_modified = 0

    def summary(self) -> dict[str, object]:
        return {"requests": len(self.latencies), "errors": sum(self.errors.values()),
                "error_kinds": dict(self.errors), "not_modified": self.not_modified,
                **_percentiles(self.latencies)}  # fmt: skip


async def _hammer(
    server: str, token: str, paths: dict[str, str], *, requests: int, concurrency: int,
    revalidate: bool = False,
) -> tuple[dict[str, Tally], float]:  # fmt: skip
    """Send ``requests`` GETs over ``concurrency`` keep-alive connections.

    Each connection asks for the ``paths`` in turn, connection i starting at the i-th, so
    that every endpoint gets an equal share at every instant. A minimal HTTP/1.1 client (raw
    asyncio streams) keeps the load generator's own CPU use small, since it shares the machine
    with the server. With ``revalidate`` a connection sends each endpoint's ETag it last got
    back in ``If-None-Match`` (a 304 is an answer, not an error).

    Returns:
        Each endpoint's tally, and the wall time.
    """
    parts = urlsplit(server)
    host, port = parts.hostname, parts.port or 80
    names = list(paths)
    head = {name: f"GET {path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
                  f"Authorization: Bearer {token}\r\nConnection: keep-alive\r\n"
            for name, path in paths.items()}  # fmt: skip
    tallies = {name: Tally() for name in names}
    remaining = requests

    async def worker(index: int) -> None:
        nonlocal remaining
        reader, writer = await asyncio.open_connection(host, port)
        etags: dict[str, bytes] = {}
        turn = index
        try:
            while remaining > 0:
                remaining -= 1
                name = names[turn % len(names)]
                turn += 1
                request = head[name]
                if revalidate and name in etags:
                    request += f"If-None-Match: {etags[name].decode()}\r\n"
                tally = tallies[name]
                started = time.perf_counter()
                try:
                    status, etag = await _get(reader, writer, (request + "\r\n").encode())
                    if status == 304 and revalidate:
                        tally.not_modified += 1
                    elif status != 200:
                        tally.errors[f"HTTP {status}"] += 1
                    if etag is not None:
                        etags[name] = etag
                except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
                    tally.errors[type(exc).__name__] += 1
                    writer.close()
                    reader, writer = await asyncio.open_connection(host, port)
                tally.latencies.append(time.perf_counter() - started)
        finally:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(concurrency)))
    return tallies, time.perf_counter() - started


def _log_rows() -> list[str]:
    """A 2-round FedAvg log with clients 0 and 1, 16 KiB a message."""
    log = ["federated_round,sender,receiver,amount_of_bytes"]
    for r in range(2):
        log += [f"{r},-1,{c},16384" for c in (0, 1)] + [f"{r},{c},-1,16384" for c in (0, 1)]
    return log


def _parts(model: bytes, parameters: list[str]) -> dict[str, tuple[str, bytes, str]]:
    """An upload's parts: ``model`` with the log above, every message naming ``parameters``."""
    log = _log_rows()
    meta = {"track": 1, "method": "loadtest", "clients": 10, "clients_per_round": 2, "rounds": 2}
    details = b"".join(
        json.dumps(dict(zip(log[0].split(","), map(int, row.split(",")), strict=True))
                   | {"format": "fp32", "parameters": parameters}).encode() + b"\n"
        for row in log[1:]
    )  # fmt: skip
    return {
        "model": ("model.safetensors", model, "application/octet-stream"),
        "communication_log": ("communication_log.csv", "\n".join(log).encode() + b"\n", "text/csv"),
        "communication_details": ("communication_log.jsonl", details, "application/jsonl"),
        "metadata": ("submission.json", json.dumps(meta).encode(), "application/json"),
    }


def _upload_parts(seed: int, number: int) -> dict[str, tuple[str, bytes, str]]:
    """A small valid track-1 submission whose checkpoint differs for every (seed, number) (the
    worker would reject it: not the reference's tensors)."""
    import numpy as np
    from safetensors.numpy import save

    tensors = {
        "a.weight": np.random.default_rng([seed, number]).standard_normal((64, 64), np.float32)
    }
    return _parts(save(tensors), [])


#: the base checkpoint's tensor that a scored upload changes (8 values)
CHANGED = "spatial_embedding.LayerNorm.bias"


@functools.cache
def _base_tensors() -> dict[str, Any]:
    """The shipped base checkpoint's tensors (read once; ``benchmark.shipped``: no torch)."""
    from safetensors.numpy import load_file

    from benchmark.shipped import BASE_MODEL_DIR

    return load_file(str(BASE_MODEL_DIR / "model.safetensors"))


def _scored_upload_parts(seed: int, number: int) -> dict[str, tuple[str, bytes, str]]:
    """A track-1 submission the worker scores: the shipped base checkpoint with ``CHANGED``
    moved by a tiny amount that differs for every (seed, number), named by every message of
    the detailed log (the binding's declared tensors)."""
    import numpy as np
    from safetensors.numpy import save

    tensors = dict(_base_tensors())
    nudge = np.random.default_rng([seed, number]).standard_normal(tensors[CHANGED].shape)
    tensors[CHANGED] = tensors[CHANGED] + (1e-3 * nudge).astype(tensors[CHANGED].dtype)
    return _parts(save(tensors), [CHANGED])


async def _upload_until(
    server: str, token: str, seed: int, stop: asyncio.Event, outcome: Counter[str],
    parts: Callable[[int, int], dict[str, tuple[str, bytes, str]]],
) -> None:  # fmt: skip
    """Upload submissions one after another until ``stop`` is set; count the answers."""
    import httpx

    number = 0
    async with httpx.AsyncClient(base_url=server, timeout=60) as client:
        while not stop.is_set():
            number += 1
            try:
                response = await client.post(
                    "/api/v1/submissions",
                    files=parts(seed, number),
                    headers={"Authorization": f"Bearer {token}"},
                )
                outcome["accepted" if response.status_code == 202 else f"HTTP {response.status_code}"] += 1
            except httpx.HTTPError as exc:
                outcome[type(exc).__name__] += 1


class Uploads:
    """``count`` clients uploading in the background of a measurement (``async with``).

    Args:
        server: the service's URL.
        tokens: one uploading team's token per client.
        scored: upload checkpoints the worker scores (``_scored_upload_parts``), not the small
            ones it would reject.
    """

    def __init__(self, server: str, tokens: list[str], *, scored: bool = False) -> None:
        self.server, self.tokens = server, tokens
        self.parts = _scored_upload_parts if scored else _upload_parts
        self.outcome: Counter[str] = Counter()
        self.round = 0

    async def __aenter__(self) -> Uploads:
        self.round += 1
        self.outcome = Counter()
        self.stop = asyncio.Event()
        self.tasks = [
            asyncio.create_task(
                _upload_until(self.server, token, 1000 * self.round + i, self.stop, self.outcome,
                              self.parts)  # fmt: skip
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


def _final_states(database_url: str | None) -> Counter[str]:
    """Submissions by final state (finished, rejected, failed) in the server's database."""
    from sqlalchemy import func, select

    from evaluator.core.db import session_scope
    from evaluator.tables import TERMINAL, Submission

    if database_url is None:
        return Counter()
    with session_scope(database_url) as session:
        rows = session.execute(
            select(Submission.status, func.count())
            .where(Submission.status.in_(TERMINAL))
            .group_by(Submission.status)
        ).all()
    return Counter({str(status): count for status, count in rows})


async def _measure(
    server: str, token: str, paths: dict[str, str], uploads: Uploads | None, *, requests: int,
    concurrency: int, wrk_seconds: int, revalidate: bool, database_url: str | None,
) -> dict[str, object]:  # fmt: skip
    """One concurrency level: the built-in client, then wrk (uploads running throughout)."""
    before = _final_states(database_url)
    accepted = Counter(uploads.outcome) if uploads else Counter()
    tallies, wall = await _hammer(
        server, token, paths, requests=requests, concurrency=concurrency, revalidate=revalidate
    )
    ended = _final_states(database_url) - before
    everything = Tally()
    for tally in tallies.values():
        everything.latencies += tally.latencies
        everything.errors += tally.errors
        everything.not_modified += tally.not_modified
    result: dict[str, object] = {
        "concurrency": concurrency,
        "seconds": round(wall, 3),
        "requests_per_second": round(requests / wall, 1),
        **everything.summary(),
        "endpoints": {name: tally.summary() for name, tally in tallies.items()},
        "uploads": dict(uploads.outcome - accepted) if uploads else None,
        "ended_meanwhile": dict(ended) if database_url else None,
    }
    if wrk_seconds:
        url = server.rstrip("/") + paths.get("status", next(iter(paths.values())))
        accepted = Counter(uploads.outcome) if uploads else Counter()
        result["wrk"] = await _wrk(url, token, connections=concurrency, seconds=wrk_seconds)
        result["wrk"]["uploads"] = dict(uploads.outcome - accepted) if uploads else None
    return result


async def _scoring_started(database_url: str | None, timeout: float = 600) -> None:
    """Wait until the worker scores an upload (a submission in ``scoring``)."""
    from sqlalchemy import func, select

    from evaluator.core.db import session_scope
    from evaluator.tables import Status, Submission

    deadline = time.monotonic() + timeout
    while database_url is not None and time.monotonic() < deadline:
        with session_scope(database_url) as session:
            scoring = session.scalar(
                select(func.count()).where(Submission.status == Status.SCORING.value)
            )
        if scoring:
            return
        await asyncio.sleep(0.5)
    if database_url is not None:
        raise click.ClickException("the worker scored no upload")


async def _levels_during_uploads(
    server: str, token: str, paths: dict[str, str], uploads: Uploads | None, levels: list[int],
    *, scored: bool, **options: Any,
) -> list[dict[str, object]]:  # fmt: skip
    """Every level in turn while the uploads run; with ``scored``, from when the worker
    started scoring the first upload (the queue then keeps it busy: uploads outpace it)."""
    async with uploads or _nothing():
        if scored and uploads is not None:
            await _scoring_started(options["database_url"])
        return [
            await _measure(server, token, paths, uploads, concurrency=level, **options)
            for level in levels
        ]


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


def _wait_ready(url: str, process: subprocess.Popen, timeout: float = 900) -> None:
    """Wait for ``/readyz`` (the embedded worker finished its start-up checks)."""
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise click.ClickException("the evaluator exited before its worker was ready")
        try:
            if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise click.ClickException("the evaluator's worker did not become ready")


def _start_server(
    database_url: str, storage: Path, api_workers: int | None, data: Path | None
) -> tuple[str, subprocess.Popen]:
    """``pflkit serve`` on a free port (``--no-worker`` without ``data``), healthy, and ready
    when it scores; returns its URL and process."""
    port = _free_port()
    server = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "PFLKIT_EVALUATOR_LOG_LEVEL": "WARNING",
        "PFLKIT_EVALUATOR_DAILY_QUOTA": "10000",
    }
    command = [sys.executable, "-m", "pflkit", "serve", "--port", str(port), "--db", database_url,
               "--storage", str(storage)]  # fmt: skip
    command += ["--data", str(data)] if data is not None else ["--no-worker"]
    if api_workers is not None:
        command += ["--workers", str(api_workers)]
    process = subprocess.Popen(command, env=env)
    _wait_healthy(server, process)
    if data is not None:
        _wait_ready(server, process)
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


def _endpoints(value: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    unknown = sorted(set(names) - set(ENDPOINTS))
    if not names or unknown:
        raise click.BadParameter(f"give endpoints among {', '.join(ENDPOINTS)}, like status,page")
    return names


#: The results table's columns (``docs/results/data/load.json``): per level, the readers, the
#: requests per second, the p50 / p95 / p99 milliseconds overall and per endpoint, and the
#: submissions that reached a final state meanwhile.
TABLE_COLUMNS: tuple[Column, ...] = (
    text("run_load_average", "run (load average)"),
    number("readers", "readers", "int"),
    number("req_s", "req/s", "int"),
    text("all", "all"),
    text("status", "status"),
    text("page", "page"),
    text("json", "JSON"),
    text("scored", "scored", align="right"),
)


def latency_text(figures: dict[str, Any] | None) -> str:
    """``p50 / p95 / p99`` in whole milliseconds (empty for an endpoint not asked)."""
    if figures is None or figures.get("p50_ms") is None:
        return ""
    return " / ".join(f"{figures[key]:,.0f}" for key in ("p50_ms", "p95_ms", "p99_ms"))


def table_rows(levels: list[dict[str, Any]], label: str) -> list[dict[str, Any]]:
    """The results table's rows of one run's levels (``--json``'s objects): the first row
    names the run (``label``) and the load average at its start and end."""
    rows = []
    for index, level in enumerate(levels):
        ended = level.get("ended_meanwhile")
        start, end = level["load_average"]
        rows.append({
            "run_load_average": "" if index else f"{label} ({start:.1f} to {end:.1f})".strip(),
            "readers": level["concurrency"], "req_s": round(level["requests_per_second"]),
            "all": latency_text(level),
            **{name: latency_text(level["endpoints"].get(name)) for name in ENDPOINTS},
            "scored": "" if ended is None else f"{sum(ended.values())} in {level['seconds']:.1f} s",
        })  # fmt: skip
    return rows


@click.command()
@click.option("--requests", "total", default=3000, show_default=True, help="requests per level")
@click.option("--concurrency", default="32", show_default=True,
              help="concurrent connections; several levels as 100,200")  # fmt: skip
@click.option("--endpoints", default="status", show_default=True,
              help=f"what the readers ask for, in turn: among {', '.join(ENDPOINTS)}")  # fmt: skip
@click.option("--uploaders", default=0, show_default=True,
              help="clients uploading submissions during each measurement")  # fmt: skip
@click.option("--data", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=None, help="run the embedded scoring worker on this benchmark and upload "
              "checkpoints it scores (default: no worker)")  # fmt: skip
@click.option("--revalidate", is_flag=True,
              help="readers send If-None-Match with their last ETag")  # fmt: skip
@click.option("--wrk", "wrk_seconds", default=0, show_default=True,
              help="also run wrk for this many seconds per level (0: not)")  # fmt: skip
@click.option("--api-workers", default=None, type=int,
              help="uvicorn processes of the server (default: pflkit serve's)")  # fmt: skip
@click.option("--db", "database_url", default=None, help="database of the throw-away server")
@click.option("--server", default=None, help="measure this running service instead")
@click.option("--token", default=None, help="token for --server")
@click.option("--submission", default=None, help="submission id for --server")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object per level")
@click.option("--record", "record_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="add the run's levels as rows of this results table's data file "
              "(docs/results/data/NAME.json, shown by a results page)")  # fmt: skip
@click.option("--label", default="", help="the run's name in the recorded table, e.g. 'after, run 1'")
def main(
    total: int,
    concurrency: str,
    endpoints: str,
    uploaders: int,
    data: Path | None,
    revalidate: bool,
    wrk_seconds: int,
    api_workers: int | None,
    database_url: str | None,
    server: str | None,
    token: str | None,
    submission: str | None,
    as_json: bool,
    record_path: Path | None,
    label: str,
) -> None:
    """Measure requests/s and latency of the polled endpoints under concurrent load, during
    uploads."""
    levels = _levels(concurrency)
    names = _endpoints(endpoints)
    process = None
    scratch = tempfile.TemporaryDirectory(prefix="pflkit-loadtest-")
    results: list[dict[str, object]] = []
    load_at_start = os.getloadavg()[0]
    try:
        if server is None:
            storage = Path(scratch.name)
            database_url = database_url or f"sqlite:///{storage / 'evaluator.db'}"
            token, submission = seed(database_url)
            tokens = _uploader_tokens(database_url, uploaders)
            server, process = _start_server(database_url, storage, api_workers, data)
        elif not (token and submission):
            raise click.UsageError("--server needs --token and --submission")
        else:
            tokens, database_url = [], None
        uploads = Uploads(server, tokens, scored=data is not None) if tokens else None
        paths = {name: ENDPOINTS[name].replace("{id}", submission) for name in names}
        results = asyncio.run(
            _levels_during_uploads(
                server, token, paths, uploads, levels, scored=data is not None, requests=total,
                wrk_seconds=wrk_seconds, revalidate=revalidate, database_url=database_url,
            )
        )  # fmt: skip
    finally:
        if process is not None:
            process.terminate()
            process.wait(timeout=60)
        scratch.cleanup()
    common = {
        "endpoints_asked": [f"GET {ENDPOINTS[name]}" for name in names],
        "api_workers": (api_workers or "pflkit serve's default") if process is not None else None,
        "worker": data is not None,
        "database": (database_url or "external").split(":", 1)[0],
        "uploaders": uploaders,
        "revalidate": revalidate,
        "load_average": [load_at_start, os.getloadavg()[0]],
    }
    for result in results:
        if as_json:
            click.echo(json.dumps({**common, **result}))
            continue
        for key, value in {**common, **result}.items():
            if key == "endpoints":
                for name, figures in value.items():  # type: ignore[attr-defined]
                    click.echo(f"{name:>22}: {figures}")
            else:
                click.echo(f"{key:>22}: {value}")
        click.echo("")
    if record_path is not None:
        rows = table_rows([{**common, **result} for result in results], label)
        command = command_line("bench.loadtest", sys.argv[1:])
        click.echo(append_results_rows(record_path, TABLE_COLUMNS, rows, command=command))


if __name__ == "__main__":
    main()
