"""``GET /healthz``: the service and its database are up."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, status
from sqlalchemy import text

from evaluator.api.deps import SessionDep
from evaluator.models import Health

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
def healthz(session: SessionDep) -> Health:
    """200 when the service answers and its database accepts a query, 503 otherwise."""
    try:
        session.execute(text("SELECT 1"))
    except Exception:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, "database unavailable") from None
    return Health(status="ok", database="ok")
