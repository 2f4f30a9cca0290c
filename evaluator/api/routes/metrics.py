"""``GET /metrics``: the service's Prometheus metrics (:mod:`evaluator.metrics`), organisers only.

Prometheus scrapes it with the organiser token: ``authorization: {type: Bearer,
credentials_file: ...}`` in its scrape configuration (docs/organisers/operations.md).
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from evaluator.api.deps import Organiser
from evaluator.api.responses import DATABASE_UNAVAILABLE, ORGANISER_AUTH

router = APIRouter(tags=["health"])


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {"content": {"text/plain": {}}, "description": "Prometheus text format 0.0.4"},
        **ORGANISER_AUTH,
        **DATABASE_UNAVAILABLE,
    },
)
def metrics(request: Request, _organiser: Organiser) -> Response:
    """The request, upload, queue, worker, scoring and failure figures (organisers only)."""
    # Every name is a classic one, so the text is also format 0.0.4, which Prometheus 2 reads.
    body = request.app.state.metrics.exposition()
    return Response(body, media_type=CONTENT_TYPE_PLAIN_0_0_4)
