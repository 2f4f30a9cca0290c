"""The FastAPI application of the evaluator service."""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractContextManager, ExitStack, asynccontextmanager
from typing import Any

from anyio import to_thread
from fastapi import APIRouter, FastAPI
from fastapi.staticfiles import StaticFiles
from sqlalchemy import select

from benchmark.tracks import TRACKS
from evaluator import team_names
from evaluator.api import errors
from evaluator.api.fast_reads import FastReads, FastReadsMiddleware
from evaluator.api.routes import health, metrics, submissions, teams
from evaluator.api.status_views import StatusViews, fast_status, shared_polls
from evaluator.api.worker_watch import WorkerWatch
from evaluator.benchmark_info import track_unavailable
from evaluator.core.config import Settings
from evaluator.core.db import migrate, read_session_factory, session_factory
from evaluator.core.headers import SecurityHeaders
from evaluator.core.security import hash_token
from evaluator.core.throttle import FailedAuthThrottle
from evaluator.metrics import RequestMetrics, ServiceMetrics
from evaluator.queue import TaskQueue
from evaluator.storage import SubmissionStore
from evaluator.tables import Team, utcnow

logger = logging.getLogger("evaluator.api")
ORGANISER_TEAM = "organisers"


def _ensure_organiser_token(settings: Settings) -> None:
    """Register the configured organiser token (as a hash) under the organisers' team."""
    if settings.organiser_token is None:
        return
    digest = hash_token(settings.organiser_token.get_secret_value())
    sessions = session_factory(settings.db_url, pool_size=settings.api_threads)
    with sessions() as session, session.begin():
        if session.scalar(select(Team).where(Team.token_hash == digest)) is not None:
            return
        team = session.scalar(select(Team).where(Team.name == ORGANISER_TEAM))
        if team is None:
            session.add(
                Team(
                    name=ORGANISER_TEAM,
                    name_key=team_names.key(ORGANISER_TEAM),
                    token_hash=digest,
                    is_organiser=True,
                    created_at=utcnow(),
                    upload_seq=0,
                )
            )
        else:
            team.token_hash, team.is_organiser = digest, True


def _report_unavailable_tracks(settings: Settings) -> None:
    """Log, at start-up, each track the benchmark directory cannot score (uploads get a 422)."""
    for track in sorted(TRACKS):
        reason = track_unavailable(settings.data_dir, track)
        if reason is not None:
            logger.error("track %s is closed: %s", track, reason)


def _freeze_startup_objects() -> None:
    """Leave the objects of the start-up (modules, classes, the app: about 215,000) out of the
    garbage collector's full passes (``gc.freeze``).

    Under 200 concurrent readers, the objects of the requests in flight outlive two young
    collections and reach the oldest generation, which then fills every second or two; each
    full pass went over every object of the process and stopped it for 0.2-0.65 s on the shared
    2-core machine: the 200-reader p99. Frozen, the start-up's objects are not scanned (nor
    collected: they live as long as the process), and a full pass goes over what came since.
    """
    gc.collect()
    gc.freeze()


def create_app(
    settings: Settings | None = None,
    *,
    migrate_database: bool = True,
    routers: Sequence[APIRouter] = (),
    services: Sequence[Callable[[FastAPI], AbstractContextManager[Any]]] = (),
) -> FastAPI:
    """Build the service.

    Args:
        settings: the configuration (read from the environment when omitted).
        migrate_database: bring the schema to the newest migration at start-up.
        routers: further routers served by the same app (``pflkit.app`` adds the
            leaderboard's pages).
        services: context managers entered (with the app) after start-up and left at shutdown,
            in every API process (``pflkit.app``: the leaderboard's view warmer).

    Returns:
        The FastAPI application.
    """
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Blocking steps run in this many threads; the database pool has a connection for each.
        to_thread.current_default_thread_limiter().total_tokens = settings.api_threads
        if migrate_database:
            migrate(settings.db_url)
        _ensure_organiser_token(settings)
        await to_thread.run_sync(_report_unavailable_tracks, settings)
        with ExitStack() as stack:
            for service in services:
                stack.enter_context(service(app))
            if settings.gc_freeze:
                _freeze_startup_objects()
            yield
        app.state.queue.close()

    app = FastAPI(
        title="PFL-DocVQA evaluator",
        version="1.0",
        summary="Scores federated Document VQA submissions on the hidden test split.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.sessions = session_factory(settings.db_url, pool_size=settings.api_threads)
    app.state.read_sessions = read_session_factory(settings.db_url, pool_size=settings.api_threads)
    app.state.status_views = StatusViews()
    app.state.status_polls = shared_polls(app.state.read_sessions)
    app.state.worker_watch = WorkerWatch(
        app.state.read_sessions, stale_seconds=settings.worker_stale_seconds
    )
    app.state.store = SubmissionStore(settings.storage_dir)
    app.state.queue = TaskQueue(settings.queue, name=settings.queue_name)
    app.state.throttle = FailedAuthThrottle(
        limit=settings.auth_failures_allowed, window_seconds=settings.auth_failure_window_seconds
    )
    # Innermost of the middleware: the fast answers get the security headers and are counted.
    app.state.fast_reads = FastReads()
    app.state.fast_reads.add("/api/v1/submissions/{submission_id}", fast_status)
    app.add_middleware(FastReadsMiddleware, fast_reads=app.state.fast_reads)
    site_path = settings.docs_url if settings.serves_site else None
    app.add_middleware(SecurityHeaders, site_path=site_path)
    errors.install(app)
    app.state.metrics = ServiceMetrics(
        app.state.read_sessions, stale_seconds=settings.worker_stale_seconds
    )
    app.add_middleware(RequestMetrics, metrics=app.state.metrics)
    app.include_router(health.router)
    app.include_router(metrics.router)
    app.include_router(submissions.router)
    app.include_router(teams.router)
    for router in routers:
        app.include_router(router)
    if site_path is not None:
        app.mount(site_path.rstrip("/"), StaticFiles(directory=settings.site_dir, html=True),
                  name="site")  # fmt: skip
    return app
