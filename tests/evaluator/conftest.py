"""Fixtures of the evaluator tests: databases (SQLite and PostgreSQL), a tiny reference VT5,
settings, and the real API server on a localhost port."""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
REDIS_URL = "redis://127.0.0.1:6379"


def free_port() -> int:
    """A free TCP port on localhost."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _postgres_available() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 5432), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def tiny_reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised tiny VT5 checkpoint directory (the organisers' reference)."""
    import torch

    from benchmark.model import save_checkpoint
    from benchmark.model.random_init import random_tiny_model

    root = tmp_path_factory.mktemp("reference")
    texts = [
        f"What is the invoice number? INV-{i:05d} total {i * 3.5:.2f} EUR ACME {i}"
        for i in range(300)
    ]
    # Short answers keep scoring fast on 2 CPU cores.
    model, processor = random_tiny_model(
        texts, root / "tokenizer", vocab_size=120, seed=0, ship_spiece=False, max_answer_tokens=4
    )
    # Random weights answer "" (EOS or padding first); silencing both makes the model answer
    # something, so that scores on a hand-built split can be non-zero.
    with torch.no_grad():
        head = model.language_backbone.get_output_embeddings().weight
        head[model.config.eos_token_id] = 0
        head[model.config.pad_token_id] = 0
    return save_checkpoint(model, processor, root / "model")


@pytest.fixture(scope="session")
def width32_reference(tmp_path_factory: pytest.TempPathFactory, tiny_benchmark: Path) -> Path:
    """A random VT5 of width 32 (one layer each side) whose tokenizer is fitted on every client's
    questions of the session's ``tiny`` benchmark: the reference of the reproduction tests, whose
    exactness does not depend on the width, and whose trainings and re-runs it makes several
    times faster than the 256-wide ``tiny_reference`` or the shipped base."""
    from benchmark.data import count_clients, load_split
    from tests.small_model import save_small_reference

    rows = [row for client in range(count_clients(tiny_benchmark))
            for row in load_split(tiny_benchmark, "train", client=client)]  # fmt: skip
    return save_small_reference(rows, tmp_path_factory.mktemp("width32-reference"),
                                vocab_size=300, max_answer_tokens=4)  # fmt: skip


def create_pg_database() -> str:
    """A fresh PostgreSQL database with a unique name; returns its URL.

    The name carries the pytest-xdist worker (``gw0``, ``gw1``; ``main`` in a serial run), so
    a database left behind by a parallel run names the worker that made it.
    """
    import psycopg

    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    name = f"pflkit_eval_test_{worker}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    return f"postgresql://postgres@127.0.0.1:5432/{name}"


def drop_pg_database(url: str) -> None:
    """Drop a test database (after closing this process's pooled connections)."""
    import psycopg

    from evaluator.core.db import get_engine

    get_engine(url).dispose()
    name = url.rsplit("/", 1)[-1]
    with psycopg.connect(PG_ADMIN, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A migrated, empty database: a SQLite file, or a PostgreSQL database on 127.0.0.1."""
    from evaluator.core.db import migrate

    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'evaluator.db'}"
        migrate(url)
        yield url
        return
    if not _postgres_available():
        pytest.skip("PostgreSQL is not running on 127.0.0.1:5432")
    url = create_pg_database()
    try:
        migrate(url)
        yield url
    finally:
        drop_pg_database(url)


@pytest.fixture
def settings(tmp_path: Path, database_url: str, tiny_reference: Path):
    """Service settings on the test database with small limits and a short lease."""
    from evaluator.core.config import Settings

    data_dir = tmp_path / "data"
    data_dir.mkdir()
    return Settings(
        storage_dir=tmp_path / "storage",
        database_url=database_url,
        queue_url=f"sqlite:///{tmp_path / 'queue.db'}",
        data_dir=data_dir,
        reference_model=str(tiny_reference),
        daily_quota=3,
        max_model_bytes=64 * 1024 * 1024,
        max_log_bytes=64 * 1024,
        max_json_bytes=8 * 1024,
        lease_seconds=2.0,
        reap_interval_seconds=0.5,
        retry_delay_seconds=0.0,
        max_attempts=2,
    )


class LiveServer:
    """The evaluator app served by uvicorn in a thread on a free localhost port."""

    def __init__(self, settings, app=None) -> None:  # type: ignore[no-untyped-def]
        import uvicorn

        from evaluator.main import create_app

        self.settings = settings
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            app if app is not None else create_app(settings),
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            lifespan="on",
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the evaluator did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture
def live_server(settings) -> Iterator[LiveServer]:  # type: ignore[no-untyped-def]
    """The real API on localhost (no embedded worker: tests drive the worker themselves)."""
    with LiveServer(settings) as server:
        yield server


@pytest.fixture
def teams(settings) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """Tokens of two participant teams and one organiser."""
    from evaluator import crud
    from evaluator.core.db import session_scope

    tokens = {}
    with session_scope(settings.db_url) as session:
        for name, organiser in (("alpha", False), ("beta", False), ("org", True)):
            tokens[name] = crud.create_team(session, name=name, organiser=organiser)[1]
    return tokens


@pytest.fixture(autouse=True)
def _offline_env() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
