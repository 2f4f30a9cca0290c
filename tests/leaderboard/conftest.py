"""A real evaluator database filled through ``evaluator.crud`` and the real server on localhost."""

from __future__ import annotations

import datetime as dt
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.evaluator.conftest import database_url  # noqa: F401  (a migrated SQLite or PostgreSQL database)

ORGANISER_TOKEN = "lb-test-organiser-" + "x" * 24
THRESHOLD = 0.85
T0 = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)


@dataclass
class Served:
    """A running server and the ids of the hand-made submissions."""

    url: str
    db_url: str
    ids: dict[str, str]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def fill_known(db_url: str) -> dict[str, str]:
    """The hand-made competition: names -> submission ids."""
    from bench.seed_leaderboard import add_submission, per_round
    from evaluator.core.db import session_factory
    from evaluator.tables import Status

    def comm(rounds: int, clients: int, message: int) -> dict:
        total = 2 * rounds * clients * message
        return {
            "total_bytes": total, "bytes_up": total // 2, "bytes_down": total // 2,
            "rounds": rounds, "messages": 2 * rounds * clients,
            "per_round": per_round(rounds, clients, message),
        }  # fmt: skip

    def scores(anls: float) -> dict:
        return {"anls": anls, "anls_in": anls + 0.02, "anls_out": anls - 0.03, "accuracy": anls - 0.1,
                "accuracy_in": anls - 0.08, "accuracy_out": anls - 0.12,
                "n_questions": 200, "n_in": 120, "n_out": 80}  # fmt: skip

    def dp(eps: float, verified: bool) -> dict:
        report = {"verified": verified, "accountant": {"epsilon_rdp": eps * 0.99, "passed": verified},
                  "log_mismatches": [] if verified else ["round 2: 3 clients in the log, 2 declared"]}  # fmt: skip
        return {
            "epsilon": eps,
            "delta": 1e-5,
            "privacy_verified": verified,
            "privacy_report": report,
        }

    plan = [
        ("alpha-lora", "alpha", 1, "LoRA r6", {**scores(0.8566), **comm(7, 2, 27_000_000)}),
        ("alpha-nf4", "alpha", 1, "LoRA + NF4", {**scores(0.8673), **comm(2, 1, 1_925_000)}),
        ("beta-shampoo", "beta", 1, "FedShampoo", {**scores(0.8891), **comm(10, 2, 250_000_000)}),
        ("gamma-at", "gamma", 1, "FedAvg at threshold", {**scores(THRESHOLD), **comm(10, 2, 250_000_000)}),
        ("delta-low", "delta", 1, "too small", {**scores(0.60), **comm(1, 1, 1000)}),
        ("alpha-dp1", "alpha", 2, "DP LoRA e1", {**scores(0.5854), **comm(30, 2, 900_000), **dp(1.0, True)}),
        ("beta-dp4", "beta", 2, "DP-CLGECL e4", {**scores(0.6018), **comm(5, 2, 900_000), **dp(4.0, True)}),
        ("gamma-dp8", "gamma", 2, "unverified", {**scores(0.70), **comm(5, 2, 900_000), **dp(8.0, False)}),
    ]  # fmt: skip
    ids: dict[str, str] = {}
    with session_factory(db_url)() as session:
        for minute, (key, team, track, method, results) in enumerate(plan):
            ids[key] = add_submission(
                session, team=team, track=track, method=method, created_at=T0 + dt.timedelta(minutes=minute), **results
            )  # fmt: skip
        ids["eps-rejected"] = add_submission(
            session, team="epsilon", track=1, method="bad upload", status=Status.REJECTED,
            reason="model: tensor 'x' has shape (2,), expected (3,)", created_at=T0 + dt.timedelta(minutes=30),
        )  # fmt: skip
    return ids


def fill_personal(db_url: str) -> dict[str, str]:
    """Hand-made track-3 submissions: names -> submission ids."""
    from bench.seed_leaderboard import add_submission
    from evaluator.core.db import session_factory

    def personal(mean: float, std: float, worst: float, unseen: float) -> dict:
        clients = [{"client": k, "n": 10 + k, "personal_anls": mean + (k - 1) * std,
                    "global_anls": mean - 0.1, "personalised": True} for k in range(3)]
        return {"anls": unseen + 0.05, "anls_out": unseen, "personal_anls": mean,
                "personal_anls_std": std, "personal_worst_client": 0, "personal_worst_anls": worst,
                "global_personal_anls": mean - 0.1, "global_unseen_anls": unseen, "n_personal": 33,
                "personal_clients": clients}  # fmt: skip

    plan = [
        ("alpha-ft", "alpha", "=fedavg-ft", {**personal(0.49112, 0.05, 0.41, 0.3301),
                                             "total_bytes": 123_456_789}),
        ("beta-local", "beta", "local-only", {**personal(0.52191, 0.08123, 0.39041, 0.27018),
                                              "total_bytes": 0}),
        ("gamma-noscore", "gamma", "pre-track-3 row", {"anls": 0.3, "total_bytes": 10}),
    ]  # fmt: skip
    ids: dict[str, str] = {}
    with session_factory(db_url)() as session:
        for minute, (key, team, method, results) in enumerate(plan):
            ids[key] = add_submission(
                session, team=team, track=3, method=method,
                created_at=T0 + dt.timedelta(minutes=40 + minute), **results,
            )  # fmt: skip
    return ids


def write_site(site: Path) -> Path:
    """A two-page documentation site (what ``make docs`` writes, in miniature)."""
    (site / "participants" / "scoring").mkdir(parents=True)
    (site / "index.html").write_text("<h1>PFL-DocVQA Kit</h1>")
    (site / "participants" / "scoring" / "index.html").write_text(
        "<h1>How a submission is scored</h1>")
    return site


def start_server(tmp: Path) -> tuple[str, str, threading.Thread, object]:
    """Migrate a SQLite database in ``tmp`` and serve the evaluator + leaderboard with uvicorn."""
    import uvicorn

    from evaluator.core.config import Settings
    from evaluator.core.db import migrate
    from pflkit.app import create_app

    data = tmp / "bench"
    data.mkdir()
    (data / "benchmark.json").write_text(
        json.dumps({"scale": "tiny", "track1_threshold": THRESHOLD})
    )
    settings = Settings(
        storage_dir=tmp / "storage",
        data_dir=data,
        organiser_token=ORGANISER_TOKEN,
        embedded_worker=False,
        site_dir=write_site(tmp / "site"),
    )
    migrate(settings.db_url)
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(settings, migrate_database=False),
            host="127.0.0.1",
            port=port,
            log_level="warning",
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.1)
    else:
        raise RuntimeError("the server did not start")
    return url, settings.db_url, thread, server


@pytest.fixture
def served_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    """Start as many independent servers as a test needs; stop them afterwards."""
    running = []

    def start() -> Served:
        url, db_url, thread, server = start_server(tmp_path_factory.mktemp("lb"))
        running.append((thread, server))
        return Served(url=url, db_url=db_url, ids=fill_known(db_url))

    yield start
    for thread, server in running:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One read-only server with the hand-made competition, shared by a module's tests."""
    url, db_url, thread, server = start_server(tmp_path_factory.mktemp("lb"))
    try:
        yield Served(url=url, db_url=db_url, ids=fill_known(db_url))
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def served_personal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A read-only server with the hand-made competition of every track (track 3 included)."""
    url, db_url, thread, server = start_server(tmp_path_factory.mktemp("lb3"))
    try:
        yield Served(url=url, db_url=db_url, ids=fill_known(db_url) | fill_personal(db_url))
    finally:
        server.should_exit = True
        thread.join(timeout=10)
