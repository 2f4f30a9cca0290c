"""Command-line group of the `evaluator` package (wired into `pflkit` by pflkit/cli.py).

``pflkit serve`` (API + one embedded worker), ``pflkit worker`` (more workers, other machines),
``pflkit team create`` (register a team, print its token) and ``pflkit submit`` (participants).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

# Served by `pflkit serve` unless --no-leaderboard; imported by name, never by this package.
LEADERBOARD_ROUTER = "leaderboard.web:router"

_DB = click.option(
    "--db",
    "database_url",
    default=None,
    metavar="URL",
    help="database URL (default: SQLite file in the storage directory; "
    "env PFLKIT_EVALUATOR_DATABASE_URL)",
)
_STORAGE = click.option(
    "--storage",
    "storage_dir",
    default=None,
    type=click.Path(path_type=Path),
    help="upload storage directory (env PFLKIT_EVALUATOR_STORAGE_DIR)",
)
_DATA = click.option(
    "--data",
    "data_dir",
    default=None,
    type=click.Path(path_type=Path),
    help="benchmark directory with the hidden test split (env PFLKIT_EVALUATOR_DATA_DIR)",
)
_QUEUE = click.option(
    "--queue",
    "queue_url",
    default=None,
    metavar="URL",
    help="sqlite:///PATH or redis://HOST:PORT/DB (env PFLKIT_EVALUATOR_QUEUE_URL)",
)


def _settings(**overrides: Any):  # type: ignore[no-untyped-def]
    """Settings from the environment with the given command-line values on top."""
    from pydantic import ValidationError

    from evaluator.core.config import Settings

    try:
        return Settings(**{key: value for key, value in overrides.items() if value is not None})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg']}" for e in exc.errors()
        )
        raise click.UsageError(f"unsafe or invalid evaluator settings: {problems}") from None


def _logging(level: str) -> None:
    import logging

    logging.basicConfig(
        level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


def _check_data(settings: Any) -> None:
    from evaluator.benchmark_info import test_split_path

    if settings.data_dir is None:
        raise click.UsageError(
            "the scoring worker needs the benchmark directory: pass --data DIR "
            "(as written by `pflkit data generate`), or --no-worker"
        )
    if test_split_path(settings.data_dir) is None:
        raise click.UsageError(
            f"{settings.data_dir} holds no hidden test split "
            "(evaluator/imdb_test.npy); pass the organisers' benchmark directory"
        )


@click.command()
@click.option("--host", default=None, help="interface to listen on (default 127.0.0.1)")
@click.option("--port", default=None, type=int, help="port (default 8000)")
@_DB
@_DATA
@_STORAGE
@_QUEUE
@click.option(
    "--worker/--no-worker",
    "embedded_worker",
    default=None,
    help="run one scoring worker next to the API (default: on)",
)
@click.option(
    "--workers",
    "api_workers",
    default=None,
    type=int,
    help="API processes (default 1; scoring workers are separate)",
)
@click.option(
    "--leaderboard/--no-leaderboard",
    default=True,
    help="serve the leaderboard pages (/leaderboard) from the same app (default: on)",
)
def serve(
    host: str | None,
    port: int | None,
    database_url: str | None,
    data_dir: Path | None,
    storage_dir: Path | None,
    queue_url: str | None,
    embedded_worker: bool | None,
    api_workers: int | None,
    leaderboard: bool,
) -> None:
    """Run the evaluator service (API and, by default, one embedded scoring worker)."""
    import subprocess

    import uvicorn

    from evaluator.core.db import migrate
    from evaluator.main import create_app

    settings = _settings(
        host=host,
        port=port,
        database_url=database_url,
        data_dir=data_dir,
        storage_dir=storage_dir,
        queue_url=queue_url,
        embedded_worker=embedded_worker,
        api_workers=api_workers,
    )
    if leaderboard and LEADERBOARD_ROUTER not in settings.extra_routers:
        settings.extra_routers.append(LEADERBOARD_ROUTER)
    _logging(settings.log_level)
    if settings.embedded_worker:
        _check_data(settings)
    migrate(settings.db_url)
    child = None
    if settings.embedded_worker:
        env = {
            **os.environ,
            **settings.environment(),
            "PFLKIT_EVALUATOR_PARENT_PID": str(os.getpid()),
        }
        child = subprocess.Popen([sys.executable, "-m", "pflkit", "worker"], env=env)
    try:
        if settings.api_workers > 1:
            os.environ.update(settings.environment())
            uvicorn.run(
                "evaluator.main:create_app",
                factory=True,
                workers=settings.api_workers,
                host=settings.host,
                port=settings.port,
                log_level=settings.log_level.lower(),
            )
        else:
            uvicorn.run(
                create_app(settings, migrate_database=False),
                host=settings.host,
                port=settings.port,
                log_level=settings.log_level.lower(),
            )
    finally:
        if child is not None:
            child.terminate()
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()


@click.command()
@_DB
@_QUEUE
@_DATA
@_STORAGE
@click.option(
    "--threads",
    "worker_threads",
    default=None,
    type=int,
    help="jobs scored at once in this process (default 1)",
)
def worker(
    database_url: str | None,
    queue_url: str | None,
    data_dir: Path | None,
    storage_dir: Path | None,
    worker_threads: int | None,
) -> None:
    """Run a scoring worker (start several, on several machines with a Redis queue)."""
    from evaluator.worker import run_worker

    settings = _settings(
        database_url=database_url,
        queue_url=queue_url,
        data_dir=data_dir,
        storage_dir=storage_dir,
        worker_threads=worker_threads,
    )
    _logging(settings.log_level)
    _check_data(settings)
    parent = os.environ.get("PFLKIT_EVALUATOR_PARENT_PID")
    run_worker(settings, parent_pid=int(parent) if parent and parent.isdigit() else None)


@click.group()
def team() -> None:
    """Manage the teams allowed to submit."""


@team.command("create")
@click.argument("name")
@_DB
@_STORAGE
@click.option("--organiser", is_flag=True, help="give the team the organiser role")
@click.option("--json", "as_json", is_flag=True, help='print {"token": ...} as JSON')
def team_create(
    name: str, database_url: str | None, storage_dir: Path | None, organiser: bool, as_json: bool
) -> None:
    """Register team NAME and print its API token (shown once; only its hash is stored)."""
    from evaluator import crud
    from evaluator.core.db import migrate, session_scope

    settings = _settings(database_url=database_url, storage_dir=storage_dir)
    migrate(settings.db_url)
    try:
        with session_scope(settings.db_url) as session:
            created, token = crud.create_team(session, name=name, organiser=organiser)
            team_id, name = created.id, created.name
    except crud.TeamExists as exc:
        raise click.ClickException(f"{exc}; choose another name") from None
    except crud.InvalidTeamName as exc:
        raise click.BadParameter(str(exc), param_hint="NAME") from None
    if as_json:
        click.echo(
            json.dumps({"token": token, "team": name, "id": team_id, "organiser": organiser})
        )
    else:
        click.echo(token)
        click.echo(
            f"team {name!r} created (id {team_id}{', organiser' if organiser else ''}); "
            "keep the token: it cannot be shown again",
            err=True,
        )


@click.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--server", required=True, envvar="PFLKIT_SERVER", help="evaluator URL")
@click.option("--token", required=True, envvar="PFLKIT_TOKEN", help="your team's API token")
@click.option("--wait/--no-wait", default=False, help="poll until the submission is scored")
@click.option("--timeout", default=3600.0, show_default=True, help="seconds to wait with --wait")
@click.option("--json", "as_json", is_flag=True, help="print the server's answer as JSON")
def submit(
    run_dir: Path, server: str, token: str, wait: bool, timeout: float, as_json: bool
) -> None:
    """Upload RUN_DIR (checkpoint/model.safetensors, communication_log.csv, submission.json,
    privacy.json for track 2) to the evaluator."""
    from evaluator import client

    try:
        accepted = client.submit(run_dir, server=server, token=token)
        result = (
            client.wait(accepted["id"], server=server, token=token, timeout=timeout)
            if wait
            else accepted
        )
    except client.SubmitError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(result))
    elif not wait:
        click.echo(f"submission {result['id']} {result['status']}: {result['url']}")
    else:
        click.echo(
            f"submission {result['id']} {result['status']}"
            + (f": {result['reason']}" if result.get("reason") else "")
        )
        if result["status"] == "finished":
            click.echo(
                f"  ANLS {result['anls']:.4f}  accuracy {result['accuracy']:.4f}  "
                f"total bytes {result['total_bytes']:,}"
            )
            if result["results"].get("privacy_verified") is not None:
                click.echo(
                    f"  privacy claim epsilon={result['results']['epsilon']}: "
                    + ("verified" if result["results"]["privacy_verified"] else "NOT verified")
                )
    if wait and result["status"] != "finished":
        sys.exit(1)
