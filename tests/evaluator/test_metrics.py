"""Issue 46: ``/metrics``, scraped from the real API on localhost and read by prometheus-client's
own text parser, moves as uploads, status reads, scores and failures happen (the scoring is a
real ``JobRunner`` on a real test split); organisers only."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from evaluator import crud
from evaluator.core.db import session_scope
from evaluator.metrics import METRICS
from evaluator.queue import TaskQueue
from evaluator.tables import Status, WorkerState
from evaluator.worker import JobRunner
from evaluator.worker.liveness import WorkerPresence
from tests.evaluator.conftest import LiveServer
from tests.evaluator.factories import metadata, write_benchmark
from tests.evaluator.service import Service, create_team, service_env
from tests.evaluator.test_api import upload

STATUS_ROUTE = "/api/v1/submissions/{submission_id}"


class LiveServerAddress:
    """Where a service listens (what :func:`scrape` needs of a :class:`LiveServer`)."""

    def __init__(self, url: str) -> None:
        self.url = url


def scrape(
    server: LiveServer | LiveServerAddress, token: str
) -> dict[tuple[str, frozenset], float]:
    """Every sample of ``/metrics`` as parsed by prometheus-client: (name, labels) -> value."""
    answer = httpx.get(f"{server.url}/metrics", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def _changed(model: bytes) -> bytes:
    """The checkpoint with one tensor changed (not a copy)."""
    from safetensors.numpy import load, save

    tensors = load(model)
    name = sorted(tensors)[0]
    tensors[name] = tensors[name] + 1.0
    return save(tensors)


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


@pytest.fixture
def scoring_settings(settings, tmp_path: Path):  # type: ignore[no-untyped-def]
    """The test settings on a benchmark with a 4-question hidden test split."""
    data = write_benchmark(tmp_path / "bench", questions=4)
    return settings.model_copy(update={"data_dir": data, "batch_size": 4})


def test_metrics_move_with_uploads_scores_and_failures(
    scoring_settings, teams: dict, tiny_reference: Path
) -> None:  # type: ignore[no-untyped-def]
    settings = scoring_settings
    org, alpha = teams["org"], teams["alpha"]
    model = (tiny_reference / "model.safetensors").read_bytes()
    with LiveServer(settings) as server:
        assert httpx.get(f"{server.url}/metrics").status_code == 401
        forbidden = httpx.get(f"{server.url}/metrics", headers={"Authorization": f"Bearer {alpha}"})
        assert forbidden.status_code == 403

        before = scrape(server, org)
        documented = {name.removesuffix("_total") for name in METRICS}
        families = {name for name, _ in before}
        for name in documented - {"pflkit_http_requests", "pflkit_uploads"}:
            assert any(f == name or f.startswith(name + "_") for f in families), name
        assert value(before, "pflkit_queue_depth") == 0
        assert value(before, "pflkit_workers_live") == 0

        accepted = upload(server.url, alpha, model=model)
        assert accepted.status_code == 202
        submission_id = accepted.json()["id"]
        invalid = upload(server.url, alpha, model=model, meta={**metadata(), "track": 99})
        assert invalid.status_code == 422
        for _ in range(3):
            httpx.get(f"{server.url}/api/v1/submissions/{submission_id}",
                      headers={"Authorization": f"Bearer {alpha}"})  # fmt: skip

        queued = scrape(server, org)
        assert value(queued, "pflkit_uploads_total", outcome="accepted") == 1
        assert value(queued, "pflkit_uploads_total", outcome="invalid") == 1
        assert value(queued, "pflkit_http_requests_total",
                     method="GET", route=STATUS_ROUTE, status="200") == 3  # fmt: skip
        assert value(queued, "pflkit_http_request_duration_seconds_count",
                     method="GET", route=STATUS_ROUTE) == 3  # fmt: skip
        assert value(queued, "pflkit_http_request_duration_seconds_sum",
                     method="GET", route=STATUS_ROUTE) > 0  # fmt: skip
        assert value(queued, "pflkit_http_requests_total",
                     method="POST", route="/api/v1/submissions", status="422") == 1  # fmt: skip
        # The scrape before counted itself: one per scrape so far.
        assert value(queued, "pflkit_http_requests_total",
                     method="GET", route="/metrics", status="200") == 1  # fmt: skip
        assert value(queued, "pflkit_queue_depth") == 1
        assert value(queued, "pflkit_queue_oldest_age_seconds") > 0
        assert value(queued, "pflkit_submissions", status="queued") == 1
        assert value(queued, "pflkit_scoring_duration_seconds_count") == 0

        # A worker starts and scores it, in this process with the real runner.
        presence = WorkerPresence(settings, embedded=False).register()
        presence.mark(WorkerState.READY)
        runner = JobRunner(settings, TaskQueue(settings.queue, name=settings.queue_name))
        runner.presence = presence
        assert runner.run(submission_id) == "finished"
        scored = scrape(server, org)
        assert value(scored, "pflkit_workers_live") == 1
        assert value(scored, "pflkit_queue_depth") == 0
        assert value(scored, "pflkit_queue_oldest_age_seconds") == 0
        assert value(scored, "pflkit_submissions", status="finished") == 1
        assert value(scored, "pflkit_scoring_duration_seconds_count") == 1
        with session_scope(settings.db_url) as session:
            seconds = crud.get_submission(session, submission_id=submission_id).scoring_seconds
        assert value(scored, "pflkit_scoring_duration_seconds_sum") == pytest.approx(seconds)
        assert value(scored, "pflkit_scoring_duration_seconds_bucket", le="+Inf") == 1
        assert value(scored, "pflkit_failures_total", kind="internal_error") == 0

        copy = upload(server.url, teams["beta"], model=model)
        assert copy.status_code == 409  # another team's copy is refused by default
        # Another upload fails inside the worker: counted by kind.
        other = upload(server.url, teams["beta"], model=_changed(model))
        assert other.status_code == 202, other.text
        failing = other.json()["id"]
        with session_scope(settings.db_url) as session:
            assert crud.claim(session, submission_id=failing, worker="w", lease_seconds=60)
            assert crud.transition(
                session, submission_id=failing, from_status=Status.SCORING,
                to_status=Status.FAILED, detail="internal error (OSError) on attempt 1 of 2",
            )  # fmt: skip
        presence.stop()
        failed = scrape(server, org)
        assert value(failed, "pflkit_failures_total", kind="internal_error") == 1
        assert value(failed, "pflkit_submissions", status="failed") == 1
        assert value(failed, "pflkit_workers_live") == 0
        assert value(failed, "pflkit_uploads_total", outcome="accepted") == 2
        assert value(failed, "pflkit_uploads_total", outcome="copy_refused") == 1


def test_several_api_processes_are_summed_in_every_scrape(
    tmp_path: Path, tiny_reference: Path
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    database_url = f"sqlite:///{tmp_path / 'evaluator.db'}"
    (tmp_path / "data").mkdir()
    env = service_env(tmp_path, reference=tiny_reference, data=tmp_path / "data",
                      database_url=database_url)  # fmt: skip
    directory = tmp_path / "prometheus"
    directory.mkdir()
    env["PROMETHEUS_MULTIPROC_DIR"] = str(directory)
    organiser = create_team(database_url, "org", organiser=True)
    service = Service(tmp_path / "serve.log", env, "--no-worker", "--workers", "2")
    try:
        service.wait_healthy()
        server = LiveServerAddress(service.url)
        before = value(scrape(server, organiser), "pflkit_http_requests_total",
                       method="GET", route="/healthz", status="200")  # fmt: skip

        def probe(_: int) -> int:
            return httpx.get(f"{service.url}/healthz").status_code  # a new connection each

        with ThreadPoolExecutor(8) as pool:
            assert set(pool.map(probe, range(60))) == {200}
        # Both processes answered some (each writes its own file once it counts a request)...
        assert len(list(directory.glob("counter_*.db"))) == 2, list(directory.iterdir())
        # ...and whichever answers the scrape reports the sum of both.
        for _ in range(4):
            samples = scrape(server, organiser)
            assert value(samples, "pflkit_http_requests_total",
                         method="GET", route="/healthz", status="200") == before + 60  # fmt: skip
            assert value(samples, "pflkit_http_request_duration_seconds_count",
                         method="GET", route="/healthz") == before + 60  # fmt: skip
    finally:
        service.stop()
