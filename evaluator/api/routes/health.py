"""``GET /healthz`` (liveness: the process and its database answer) and ``GET /readyz``
(readiness: the database is at this code's migrations and a scoring worker is live).

Uploads are accepted while the service is not ready: the queue is durable, and a queued
submission's status says that it waits for a worker (``evaluator.api.worker_watch``).
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, status
from fastapi.responses import JSONResponse
from sqlalchemy import text

from evaluator import crud
from evaluator.api.deps import SessionDep, SettingsDep
from evaluator.api.responses import Responses
from evaluator.api.worker_watch import no_worker_reason
from evaluator.core.db import code_heads, revisions_of
from evaluator.crud import Liveness
from evaluator.schemas import Health, ReadyState

router = APIRouter(tags=["health"])
#: the probe's own 503 (no ``Retry-After``: a prober asks again at its own pace)
DATABASE_DOWN: Responses = {503: {"description": "the database does not answer a query"}}


@router.get("/healthz", response_model=Health, responses=DATABASE_DOWN)
def healthz(session: SessionDep) -> Health:
    """200 when the service answers and its database accepts a query, 503 otherwise."""
    try:
        session.execute(text("SELECT 1"))
    except Exception:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, "database unavailable") from None
    return Health(status="ok", database="ok")


# Out of the OpenAPI schema: a probe for load balancers and supervisors, whose 503 is its
# answer (not a server error), like Kubernetes' readiness probes.
@router.get("/readyz", response_model=ReadyState, include_in_schema=False)
def readyz(session: SessionDep, settings: SettingsDep) -> JSONResponse:
    """200 when submissions will be scored: the database is at the newest migration and a
    scoring worker has beaten within ``worker_stale_seconds``; 503 with the reasons otherwise."""
    try:
        revisions = revisions_of(session.connection())
    except Exception:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, "database unavailable") from None
    behind = revisions != code_heads()
    try:
        liveness: Liveness | None = crud.liveness(
            session, stale_seconds=settings.worker_stale_seconds
        )
    except Exception:
        session.rollback()
        if not behind:
            raise HTTPException(
                status.HTTP_503_SERVICE_UNAVAILABLE, "database unavailable"
            ) from None
        liveness = None  # an old schema may lack the workers' table: its reason says it all
    reasons = []
    if behind:
        reasons.append(
            f"the database is at migration {', '.join(sorted(revisions)) or 'none'} and this "
            f"code needs {', '.join(sorted(code_heads()))}: restart `pflkit serve` (it migrates "
            "at start-up) or run the migrations"
        )
    if liveness is not None and liveness.live == 0:
        reasons.append(no_worker_reason(liveness, stale_seconds=settings.worker_stale_seconds))
    state = ReadyState(
        status="not ready" if reasons else "ready",
        database="behind its migrations" if behind else "ok",
        live_workers=liveness.live if liveness is not None else 0,
        starting_workers=liveness.starting if liveness is not None else 0,
        reasons=reasons,
    )
    return JSONResponse(
        state.model_dump(mode="json"),
        status_code=status.HTTP_503_SERVICE_UNAVAILABLE if reasons else status.HTTP_200_OK,
    )
