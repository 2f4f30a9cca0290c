"""Answers for failures of the service's own parts, so that none reaches a client as a bare 500.

While the database restarts or is unreachable, every request that needs it is answered 503
with ``Retry-After`` (the connection pool is renewed on the next request: the service recovers
without a restart of its own); an upload refused this way keeps nothing (``received`` rows left
behind are failed by the reaper).
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request, status
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError, DisconnectionError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

logger = logging.getLogger("evaluator.api")
#: seconds a client is asked to wait before retrying while the database is unavailable
RETRY_AFTER_SECONDS = 5


def _unavailable(exc: Exception) -> bool:
    """Whether a database exception means "unavailable" (not a bug in a query)."""
    if isinstance(exc, OperationalError | DisconnectionError | PoolTimeout):
        return True
    return isinstance(exc, DBAPIError) and bool(exc.connection_invalidated)


async def database_unavailable(request: Request, exc: Exception) -> JSONResponse:
    """503 with ``Retry-After`` for a database that is down or restarting; re-raised
    otherwise (a programming error stays a 500 in the log)."""
    if not _unavailable(exc):
        raise exc
    logger.warning("database unavailable on %s %s: %s", request.method, request.url.path,
                   type(exc.orig if isinstance(exc, DBAPIError) else exc).__name__)  # fmt: skip
    return JSONResponse(
        {"detail": "the evaluator's database is unavailable for a moment; retry shortly"},
        status_code=status.HTTP_503_SERVICE_UNAVAILABLE,
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


def install(app: FastAPI) -> None:
    """Register the handlers on ``app``."""
    for exception in (DBAPIError, DisconnectionError, PoolTimeout):
        app.add_exception_handler(exception, database_unavailable)
