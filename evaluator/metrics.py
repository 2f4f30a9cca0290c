"""The service's Prometheus metrics (``GET /metrics``, organisers only).

Two sources:

- **The API processes** (:class:`RequestMetrics`, a pure ASGI middleware, into
  :class:`ServiceMetrics`): requests by method, route template and status, their latency, and
  uploads by outcome. With ``--workers N`` and ``PROMETHEUS_MULTIPROC_DIR`` set, a scrape of
  any process reports the sums over all of them; without it, the process that answers.
- **The database** (:class:`DatabaseCollector`, read at every scrape, the same from any
  process): the queue's depth and oldest age, live and starting workers, submissions by
  status, the scoring and audit durations of scored submissions (histograms), failures by kind.

:data:`METRICS` lists every family with its type and labels; ``docs/organisers/operations.md``
has the same list with the Grafana queries.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from evaluator import crud
from evaluator.operations import failure_kind
from evaluator.tables import Status, Submission, SubmissionEvent, utcnow

#: latency buckets of the API (seconds): the status endpoint answers in milliseconds, an
#: upload of a real checkpoint in seconds
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
#: scoring and audit durations (seconds): the tiny model in a second, VT5-base on a CPU in hours
JOB_BUCKETS = (1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0, 12 * 3600.0)
UPLOAD_ROUTE = "/api/v1/submissions"
#: prometheus-client's switch to its multiprocess mode (``pflkit serve --workers N``)
MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"
#: an upload's answer -> its outcome label
UPLOAD_OUTCOMES = {
    202: "accepted",
    401: "unauthenticated",
    409: "copy_refused",
    413: "too_large",
    415: "not_multipart",
    422: "invalid",
    429: "quota_or_throttled",
    503: "unavailable",
    507: "storage_full",
}
#: every metric family: name -> (type, labels, meaning)
METRICS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "pflkit_http_requests_total": (
        "counter", ("method", "route", "status"), "requests answered, by route template"),
    "pflkit_http_request_duration_seconds": (
        "histogram", ("method", "route"), "time to answer a request"),
    "pflkit_uploads_total": ("counter", ("outcome",), "uploads by outcome"),
    "pflkit_queue_depth": ("gauge", (), "submissions queued for scoring"),
    "pflkit_queue_oldest_age_seconds": (
        "gauge", (), "how long the oldest queued submission has waited (0: none)"),
    "pflkit_workers_live": ("gauge", (), "scoring workers ready and beating"),
    "pflkit_workers_starting": ("gauge", (), "scoring workers running their start-up checks"),
    "pflkit_submissions": ("gauge", ("status",), "submissions by state"),
    "pflkit_scoring_duration_seconds": (
        "histogram", (), "test-set scoring time of the scored submissions"),
    "pflkit_audit_duration_seconds": (
        "histogram", (), "privacy audit time of the audited submissions"),
    "pflkit_failures_total": (
        "counter", ("kind",), "transitions to failed: internal_error, worker_lost, "
        "upload_incomplete, other"),
}  # fmt: skip


class ServiceMetrics:
    """This API process's request series and the database's figures, and their exposition.

    Set ``PROMETHEUS_MULTIPROC_DIR`` to an empty directory (emptied before every start, as
    prometheus-client requires) before ``pflkit serve --workers N``: every API process then
    writes its request series there and a scrape of any process reports the sums over all of
    them (prometheus-client's multiprocess mode). Without it, each process counts its own.

    Args:
        sessions: a callable opening a session (the app's read sessions).
        stale_seconds: a worker beat older than this does not count.
    """

    def __init__(self, sessions: Callable[[], Session], *, stale_seconds: float) -> None:
        self.directory = os.environ.get(MULTIPROCESS_ENV) or None
        self.database = DatabaseCollector(sessions, stale_seconds=stale_seconds)
        # In multiprocess mode the series live in the directory's files, not in a registry.
        own = None if self.directory else CollectorRegistry(auto_describe=False)
        self.requests = Counter(
            "pflkit_http_requests", METRICS["pflkit_http_requests_total"][2],
            ("method", "route", "status"), registry=own,
        )  # fmt: skip
        self.latency = Histogram(
            "pflkit_http_request_duration_seconds",
            METRICS["pflkit_http_request_duration_seconds"][2], ("method", "route"),
            buckets=REQUEST_BUCKETS, registry=own,
        )  # fmt: skip
        self.uploads = Counter(
            "pflkit_uploads", METRICS["pflkit_uploads_total"][2], ("outcome",), registry=own
        )
        if own is not None:
            own.register(self.database)
        self._registry = own

    def record(self, method: str, route: str, code: int, seconds: float) -> None:
        """Count one answered request."""
        self.requests.labels(method, route, str(code)).inc()
        self.latency.labels(method, route).observe(seconds)
        if method == "POST" and route == UPLOAD_ROUTE:
            outcome = UPLOAD_OUTCOMES.get(code, "server_error" if code >= 500 else "other")
            self.uploads.labels(outcome).inc()

    def exposition(self) -> bytes:
        """Every series in Prometheus' text format (the database is read now)."""
        registry = self._registry
        if registry is None:
            registry = CollectorRegistry(auto_describe=False)
            MultiProcessCollector(registry, path=self.directory)
            registry.register(self.database)
        return generate_latest(registry)


class RequestMetrics:
    """ASGI middleware counting requests, their latency and uploads by outcome.

    Args:
        app: the wrapped ASGI app.
        metrics: where they are counted.
    """

    def __init__(self, app: Any, metrics: ServiceMetrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        answered = [500]  # an exception that escapes the app is answered 500

        async def send_and_note(message: dict) -> None:
            if message["type"] == "http.response.start":
                answered[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            # The route's template, never the raw path: one series per route, whatever the ids.
            route = getattr(scope.get("route"), "path", "unmatched")
            self.metrics.record(scope["method"], route, answered[0], time.perf_counter() - started)


def _histogram(
    session: Session, column: Any, name: str, buckets: tuple[float, ...]
) -> HistogramMetricFamily:
    """A histogram of a submission column's non-null values, counted by the database."""
    counts = session.execute(
        select(
            func.count(column),
            func.coalesce(func.sum(column), 0.0),
            *(func.sum(case((column <= bound, 1), else_=0)) for bound in buckets),
        )
    ).one()
    total, value_sum, *below = counts
    return HistogramMetricFamily(
        name, METRICS[name][2],
        buckets=[*((str(b), int(c or 0)) for b, c in zip(buckets, below, strict=True)),
                 ("+Inf", int(total))],
        sum_value=float(value_sum),
    )  # fmt: skip


class DatabaseCollector(Collector):
    """The figures every API process reads alike from the database, at each scrape.

    Args:
        sessions: a callable opening a session (the app's read sessions).
        stale_seconds: a worker beat older than this does not count.
    """

    def __init__(self, sessions: Callable[[], Session], *, stale_seconds: float) -> None:
        self.sessions, self.stale_seconds = sessions, stale_seconds

    def describe(self) -> list[Metric]:
        """Nothing up front: describing would read the database at registration."""
        return []

    def collect(self) -> Iterator[Metric]:
        now = utcnow()
        with self.sessions() as session:
            queue = crud.queue_state(session)
            liveness = crud.liveness(session, stale_seconds=self.stale_seconds, now=now)
            by_status = dict(
                session.execute(
                    select(Submission.status, func.count()).group_by(Submission.status)
                ).all()
            )
            failed = session.execute(
                select(SubmissionEvent.detail, func.count())
                .where(SubmissionEvent.to_status == Status.FAILED.value)
                .group_by(SubmissionEvent.detail)
            ).all()
            scoring = _histogram(session, Submission.scoring_seconds,
                                 "pflkit_scoring_duration_seconds", JOB_BUCKETS)  # fmt: skip
            audit = _histogram(session, Submission.audit_seconds,
                               "pflkit_audit_duration_seconds", JOB_BUCKETS)  # fmt: skip
        yield GaugeMetricFamily("pflkit_queue_depth", METRICS["pflkit_queue_depth"][2],
                                value=queue.depth)  # fmt: skip
        oldest = queue.oldest_queued_at
        yield GaugeMetricFamily(
            "pflkit_queue_oldest_age_seconds", METRICS["pflkit_queue_oldest_age_seconds"][2],
            value=(now - oldest).total_seconds() if oldest is not None else 0.0,
        )  # fmt: skip
        yield GaugeMetricFamily("pflkit_workers_live", METRICS["pflkit_workers_live"][2],
                                value=liveness.live)  # fmt: skip
        yield GaugeMetricFamily("pflkit_workers_starting", METRICS["pflkit_workers_starting"][2],
                                value=liveness.starting)  # fmt: skip
        submissions = GaugeMetricFamily(
            "pflkit_submissions", METRICS["pflkit_submissions"][2], labels=("status",)
        )
        for state in Status:
            submissions.add_metric((state.value,), by_status.get(state.value, 0))
        yield submissions
        yield scoring
        yield audit
        kinds: dict[str, int] = {"internal_error": 0, "worker_lost": 0, "upload_incomplete": 0,
                                 "other": 0}  # fmt: skip
        for detail, count in failed:
            kinds[failure_kind(detail)] += int(count)
        failures = CounterMetricFamily(
            "pflkit_failures", METRICS["pflkit_failures_total"][2], labels=("kind",)
        )
        for kind, count in kinds.items():
            failures.add_metric((kind,), count)
        yield failures
