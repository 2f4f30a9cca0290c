"""``pflkit serve``: the evaluator's API with the leaderboard's pages, and one embedded worker.

Lives above both packages because it runs the app of :mod:`pflkit.app`. Stopping it with SIGTERM
or SIGINT shuts the server down gracefully and stops the embedded worker before exiting. When the
embedded worker refuses to start or dies, the service stops and exits non-zero with its reason
(:mod:`evaluator.worker.embedded`).
"""

from __future__ import annotations

import os
import signal
from types import FrameType
from typing import Any

import click

from evaluator.cli import _DATA, _DB, _QUEUE, _STORAGE, service_settings


def _exit_on_signal(signum: int, _frame: FrameType | None) -> None:
    """Turn SIGTERM into SystemExit, so that the ``finally`` clauses run."""
    raise SystemExit(128 + signum)


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
def serve(leaderboard: bool, **options: Any) -> None:
    """Run the evaluator service (API, leaderboard pages and, by default, one scoring worker)."""
    import uvicorn

    from evaluator.core.db import migrate
    from evaluator.worker.embedded import EmbeddedWorker
    from pflkit.app import create_api, create_app

    # The API processes leave their start-up's objects out of the full garbage collections
    # (Settings.gc_freeze): under many concurrent readers those passes were the tail latency.
    settings = service_settings(options, scores=None).model_copy(update={"gc_freeze": True})
    migrate(settings.db_url)
    # uvicorn restores the previous handler after its graceful shutdown and raises the signal
    # again; with Python's default SIGTERM handler that killed the process before the embedded
    # worker was stopped (it lingered until it noticed its parent was gone).
    signal.signal(signal.SIGTERM, _exit_on_signal)
    worker = EmbeddedWorker(settings).start() if settings.embedded_worker else None
    factory = create_app if leaderboard else create_api
    try:
        if settings.api_workers > 1:
            os.environ.update(settings.environment())
            uvicorn.run(
                f"pflkit.app:{factory.__name__}",
                factory=True,
                workers=settings.api_workers,
                host=settings.host,
                port=settings.port,
                log_level=settings.log_level.lower(),
            )
        else:
            uvicorn.run(
                factory(settings, migrate_database=False),
                host=settings.host,
                port=settings.port,
                log_level=settings.log_level.lower(),
            )
    except KeyboardInterrupt:
        pass
    except SystemExit:
        if worker is None or worker.failure is None:
            raise
    finally:
        if worker is not None:
            worker.stop()
    # The embedded worker died or refused to start: the service stopped, and says why.
    if worker is not None and worker.failure is not None:
        raise click.ClickException(worker.failure)
