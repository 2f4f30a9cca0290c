"""End to end: `pflkit serve`, `pflkit team create`, `pflkit submit --wait` against the real
server on localhost, with SQLite + the embedded worker, PostgreSQL + Redis + two workers, and a
worker killed mid-scoring."""

from __future__ import annotations

import json
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import pytest

from tests.evaluator.conftest import (
    REDIS_URL,
    _postgres_available,
    create_pg_database,
    drop_pg_database,
)
from tests.evaluator.factories import (
    accept_predictions,
    declaration,
    fedavg_log,
    metadata,
    secret_answer,
    write_benchmark,
    write_run,
)
from tests.evaluator.service import Process, Service, create_team, pflkit, poll, service_env

QUESTIONS = 12
BATCH = 8


def _evaluate(reference: Path, data: Path):  # type: ignore[no-untyped-def]
    """`benchmark.evaluation.evaluate` of the reference checkpoint on the test split, with the
    workers' batch size and torch threads (so the arithmetic is the same)."""
    import torch

    from benchmark.data import load_split
    from benchmark.evaluation import evaluate
    from benchmark.model import load_model, load_processor

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with tempfile.TemporaryDirectory() as cache:
            return evaluate(
                load_model(reference),
                load_processor(reference),
                load_split(data, "test"),
                batch_size=BATCH,
                progress=False,
                cache_dir=cache,
            )
    finally:
        torch.set_num_threads(threads)


def _texts(predictions) -> list[str]:  # type: ignore[no-untyped-def]
    texts = []
    for item in predictions:
        if isinstance(item, str):
            texts.append(item)
        elif isinstance(item, dict):
            texts.append(str(item.get("prediction", item.get("answer", ""))))
        else:
            texts.append(str(getattr(item, "prediction", item)))
    return texts


@pytest.fixture(scope="module")
def scored_benchmark(tmp_path_factory: pytest.TempPathFactory, tiny_reference: Path):  # type: ignore[no-untyped-def]
    """A test split on which the reference checkpoint earns a non-trivial ANLS, and that ANLS.

    Every question keeps a distinctive secret answer; a third of them also accept the model's
    own prediction, another third the prediction with one character changed (partial ANLS), so
    the service's scores are compared with the evaluation loop's on numbers that are not 0.
    Predictions do not depend on the answers, so the loop's result on the rewritten split is
    `score_predictions` of the same predictions.
    """
    from benchmark.data import load_split
    from benchmark.evaluation import score_predictions

    directory = write_benchmark(tmp_path_factory.mktemp("benchmark"), questions=QUESTIONS)
    predictions = _texts(_evaluate(tiny_reference, directory).predictions)
    accept_predictions(directory / "evaluator" / "imdb_test.npy", predictions)
    expected = score_predictions(load_split(directory, "test"), predictions)
    assert expected.anls > 0.2, predictions
    return directory, expected


@pytest.fixture(scope="module")
def benchmark_dir(scored_benchmark) -> Path:  # type: ignore[no-untyped-def]
    return scored_benchmark[0]


@pytest.fixture(scope="module")
def expected(scored_benchmark):  # type: ignore[no-untyped-def]
    return scored_benchmark[1]


def _assert_scores_match(body: dict, expected, organiser_view: dict) -> None:  # type: ignore[no-untyped-def]
    """The organisers' view holds the evaluation loop's scores at full precision; the team's
    own view the same scores to 4 decimals."""
    for view in (body, organiser_view):
        assert view["status"] == "finished", view
        assert view["results"]["n_questions"] == QUESTIONS
        assert view["results"]["n_in"] == view["results"]["n_out"] == QUESTIONS // 2
        assert view["results"]["anls_in"] is not None and view["results"]["anls_out"] is not None
    assert organiser_view["anls"] == pytest.approx(float(expected.anls), abs=1e-9)
    assert organiser_view["accuracy"] == pytest.approx(float(expected.accuracy), abs=1e-9)
    weighted = (organiser_view["results"]["anls_in"] + organiser_view["results"]["anls_out"]) / 2
    assert weighted == pytest.approx(organiser_view["anls"], abs=1e-9)
    for name in ("anls", "accuracy"):
        assert body[name] == round(float(getattr(expected, name)), 4)
    for name in ("anls_in", "anls_out", "accuracy_in", "accuracy_out"):
        assert body["results"][name] == round(organiser_view["results"][name], 4)


def _organiser_view(url: str, token: str, submission_id: str) -> dict:
    return httpx.get(
        f"{url}/api/v1/submissions/{submission_id}", headers={"Authorization": f"Bearer {token}"}
    ).json()


def _leaks(text: str) -> list[str]:
    return [secret_answer(i) for i in range(QUESTIONS) if secret_answer(i) in text]


def test_track1_and_track2_runs_finish_with_the_evaluation_loops_scores(
    tmp_path: Path, tiny_reference: Path, benchmark_dir: Path, expected
) -> None:
    database_url = f"sqlite:///{tmp_path / 'evaluator.db'}"
    env = service_env(
        tmp_path, reference=tiny_reference, data=benchmark_dir, database_url=database_url
    )
    token = create_team(database_url, "alpha")
    organiser = create_team(database_url, "org", organiser=True)
    service = Service(tmp_path / "serve.log", env)
    responses: list[str] = []
    try:
        service.wait_healthy()
        run1 = write_run(
            tmp_path / "run1",
            tiny_reference / "model.safetensors",
            log=fedavg_log(rounds=2, clients=(3, 4), nbytes=4000),
        )
        result = pflkit(
            "submit",
            str(run1),
            "--server",
            service.url,
            "--token",
            token,
            "--wait",
            "--json",
            "--timeout",
            "300",
        )
        assert result.returncode == 0, result.stdout + result.stderr + service.output()
        track1 = json.loads(result.stdout)
        responses.append(result.stdout)
        expected = _evaluate(tiny_reference, benchmark_dir)
        assert expected.anls > 0.2
        _assert_scores_match(
            track1, expected, _organiser_view(service.url, organiser, track1["id"])
        )
        assert track1["total_bytes"] == 2 * (2 * 4000 + 2 * 2000)
        assert track1["results"]["bytes_up"] == 8000 and track1["results"]["rounds"] == 2
        assert [r["total"] for r in track1["results"]["per_round"]] == [12000, 12000]
        assert [t["to_status"] for t in track1["transitions"]] == [
            "received",
            "queued",
            "scoring",
            "finished",
        ]

        run2 = write_run(
            tmp_path / "run2",
            tiny_reference / "model.safetensors",
            track=2,
            meta=metadata(
                2, method="fl-group-dp", server={"strategy": "fedavg", "lr": 1.0, "momentum": 0.0}
            ),
            privacy=declaration(epsilon=8.0, sampling="poisson"),
        )
        # The unchanged reference with a DP claim whose arithmetic verifies: since issue 36 it
        # is rejected, as it carries none of the declared noise (a real DP run's privacy
        # report is checked in test_e2e_baselines.py).
        result = pflkit("submit", str(run2), "--server", service.url, "--token", token, "--wait")
        assert result.returncode == 1, result.stdout + result.stderr
        assert (
            "rejected" in result.stdout and "the declared noise has nowhere to be" in result.stdout
        )
        listing = httpx.get(
            f"{service.url}/api/v1/submissions", headers={"Authorization": f"Bearer {token}"}
        )
        responses.append(listing.text)
        track2 = next(s for s in listing.json()["submissions"] if s["track"] == 2)
        assert track2["status"] == "rejected" and track2["results"]["anls"] is None
    finally:
        service.stop()
    # The hidden answers never left the evaluator: not in answers, logs or the database.
    assert _leaks("\n".join(responses)) == []
    assert _leaks(service.output()) == []
    import sqlite3

    with sqlite3.connect(tmp_path / "evaluator.db") as connection:
        dump = "\n".join(connection.iterdump())
    assert _leaks(dump) == []


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.redis
def test_postgres_and_redis_with_two_workers(
    tmp_path: Path, tiny_reference: Path, benchmark_dir: Path, expected
) -> None:
    if not _postgres_available():
        pytest.skip("PostgreSQL is not running on 127.0.0.1:5432")
    import redis

    queue_name = f"pflkit-test-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(f"{REDIS_URL}/13")
    database_url = create_pg_database()
    env = service_env(
        tmp_path,
        reference=tiny_reference,
        data=benchmark_dir,
        database_url=database_url,
        queue_url=f"{REDIS_URL}/13",
        queue_name=queue_name,
    )
    # Three teams upload the same checkpoint: the copies are flagged for the organisers, not
    # refused, so that both workers have three jobs to share.
    env["PFLKIT_EVALUATOR_COPY_POLICY"] = "flag"
    processes: list[Process] = []
    try:
        tokens = [create_team(database_url, name) for name in ("alpha", "beta", "gamma")]
        organiser = create_team(database_url, "org", organiser=True)
        service = Service(tmp_path / "serve.log", env, "--no-worker")
        processes.append(service)
        processes += [Process(["worker"], tmp_path / f"worker{i}.log", env) for i in range(2)]
        service.wait_healthy()
        ids = []
        for index, token in enumerate(tokens):
            run = write_run(tmp_path / f"run{index}", tiny_reference / "model.safetensors")
            result = pflkit("submit", str(run), "--server", service.url, "--token", token, "--json")
            assert result.returncode == 0, result.stderr
            ids.append(json.loads(result.stdout)["id"])
        for submission_id, token in zip(ids, tokens, strict=True):
            body = poll(
                f"{service.url}/api/v1/submissions/{submission_id}",
                token,
                until={"finished", "rejected", "failed"},
                interval=0.5,
            )
            _assert_scores_match(
                body, expected, _organiser_view(service.url, organiser, submission_id)
            )
            assert [t["to_status"] for t in body["transitions"]].count("finished") == 1
        logs = "".join(p.output() for p in processes[1:])
        assert logs.count("finished") >= 3
    finally:
        for process in processes:
            process.stop()
        drop_pg_database(database_url)
        for key in client.scan_iter(f"*{queue_name}*"):
            client.delete(key)


def test_worker_killed_mid_scoring_finishes_once(
    tmp_path: Path, tiny_reference: Path, benchmark_dir: Path, expected
) -> None:
    database_url = f"sqlite:///{tmp_path / 'evaluator.db'}"
    env = service_env(
        tmp_path, reference=tiny_reference, data=benchmark_dir, database_url=database_url
    )
    env["PFLKIT_EVALUATOR_WORKER_BEAT_SECONDS"] = "0.5"
    token = create_team(database_url, "alpha")
    organiser = create_team(database_url, "org", organiser=True)
    service = Service(tmp_path / "serve.log", env, "--no-worker")
    first = Process(["worker"], tmp_path / "worker1.log", env)
    second = None
    try:
        service.wait_healthy()
        # Let the first worker finish its start-up (test split and reference loaded).
        deadline = time.monotonic() + 120
        while "worker ready" not in first.output():
            assert time.monotonic() < deadline and first.process.poll() is None, first.output()
            time.sleep(0.1)
        run = write_run(tmp_path / "run", tiny_reference / "model.safetensors")
        result = pflkit("submit", str(run), "--server", service.url, "--token", token, "--json")
        assert result.returncode == 0, result.stderr
        url = json.loads(result.stdout)["url"]
        body = poll(url, token, until={"scoring", "finished"}, interval=0.01)
        assert body["status"] == "scoring", "scored before it could be killed"
        first.kill()
        second = Process(["worker"], tmp_path / "worker2.log", env)
        body = poll(url, token, until={"finished", "rejected", "failed"}, interval=0.2)
        assert body["status"] == "finished", body
        assert body["attempts"] == 2
        statuses = [t["to_status"] for t in body["transitions"]]
        assert statuses.count("finished") == 1
        assert statuses == ["received", "queued", "scoring", "queued", "scoring", "finished"]
        assert "lease" in body["transitions"][3]["detail"]
        _assert_scores_match(body, expected, _organiser_view(service.url, organiser, body["id"]))
        # Issue 46: the killed worker is silent in the registry, the second one live.
        operations = httpx.get(f"{service.url}/api/v1/leaderboard/organiser",
                               headers={"Authorization": f"Bearer {organiser}"}).json()["operations"]  # fmt: skip
        states = {w["pid"]: w["state"] for w in operations["workers"]}
        assert states == {first.process.pid: "silent", second.process.pid: "ready"}, operations
        assert operations["live_workers"] == 1 and operations["failures"] == []
        assert httpx.get(f"{service.url}/readyz").json()["status"] == "ready"
    finally:
        for process in (first, second, service):
            if process is not None:
                process.stop()


@pytest.mark.slow
def test_nan_checkpoint_is_rejected_by_the_embedded_worker(
    tmp_path: Path, tiny_reference: Path
) -> None:
    from safetensors.numpy import load_file, save_file

    data = write_benchmark(tmp_path / "benchmark", questions=4)
    tensors = load_file(str(tiny_reference / "model.safetensors"))
    name = sorted(tensors)[0]
    tensors[name] = tensors[name] * float("nan")
    save_file(tensors, str(tmp_path / "nan.safetensors"))
    database_url = f"sqlite:///{tmp_path / 'evaluator.db'}"
    env = service_env(tmp_path, reference=tiny_reference, data=data, database_url=database_url)
    token = create_team(database_url, "alpha")
    service = Service(tmp_path / "serve.log", env)
    try:
        service.wait_healthy()
        run = write_run(tmp_path / "run", tmp_path / "nan.safetensors")
        result = pflkit(
            "submit",
            str(run),
            "--server",
            service.url,
            "--token",
            token,
            "--wait",
            "--timeout",
            "300",
        )
        assert result.returncode == 1, result.stdout + result.stderr + service.output()
        assert "rejected: model:" in result.stdout
        assert f"NaN or infinite values ({name})" in result.stdout
    finally:
        service.stop()
    assert service.process.returncode is not None
