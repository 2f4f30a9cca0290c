"""Track 3 through the real HTTP server and the real worker: personalisations uploaded as
``personal_{k}`` fields (``pflkit submit``'s client), stored atomically, checked, scored with one
model in memory, figures equal to a computation by hand, public views at 4 decimals, ranked."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import numpy as np
import pytest
from safetensors.numpy import load_file, save
from sqlalchemy import select

from evaluator.client import SubmitError, run_files, submit
from evaluator.core.db import session_scope
from evaluator.queue import TaskQueue
from evaluator.tables import SubmissionFigure
from evaluator.validation.personal import declared_frozen
from evaluator.worker import JobRunner
from tests.evaluator.conftest import LiveServer
from tests.evaluator.factories import (
    accept_predictions,
    fedavg_log,
    metadata,
    secret_answer,
    write_personal_benchmark,
    write_run,
)

QUESTIONS = 12
BATCH = 8
#: zero input embeddings (tied to the output layer) make every answer the empty string.
EMBEDDING = "language_backbone.shared.weight"


def _predictions(reference: Path, data: Path) -> list[str]:
    """The reference model's answers to the test split, with the worker's batch and threads."""
    import tempfile

    import torch

    from benchmark.data import load_split
    from benchmark.evaluation import evaluate
    from benchmark.model import load_model, load_processor

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with tempfile.TemporaryDirectory() as cache:
            result = evaluate(load_model(reference), load_processor(reference),
                              load_split(data, "test"), batch_size=BATCH, progress=False,
                              cache_dir=cache)  # fmt: skip
    finally:
        torch.set_num_threads(threads)
    return [p.prediction for p in result.predictions]


@pytest.fixture(scope="module")
def personal_benchmark(tmp_path_factory: pytest.TempPathFactory, tiny_reference: Path):  # type: ignore[no-untyped-def]
    """Two clients (client 0: ACME Corp, client 1: Globex), 3 personal test questions each and
    6 unseen; answers rewritten so the global model earns exact and partial ANLS (as in
    test_e2e), and its per-question ANLS by question id."""
    from benchmark.data import load_split
    from benchmark.evaluation import score_predictions

    directory = write_personal_benchmark(tmp_path_factory.mktemp("personal"), questions=QUESTIONS)
    predictions = _predictions(tiny_reference, directory)
    accept_predictions(directory / "evaluator" / "imdb_test.npy", predictions)
    scored = score_predictions(load_split(directory, "test"), predictions)
    return directory, {p.question_id: p.anls for p in scored.predictions}


def _tensors(reference: Path) -> dict[str, np.ndarray]:
    return load_file(str(reference / "model.safetensors"))


def _track3_run(directory: Path, reference: Path, personal: dict[int, bytes], clients: int,
                **meta: object) -> Path:  # fmt: skip
    """A track-3 run directory as ``pflkit train`` writes it (``personal/client_{k}...``)."""
    write_run(directory, reference / "model.safetensors",
              meta=metadata(3, method="fedavg-ft", clients=clients, **meta))  # fmt: skip
    (directory / "personal").mkdir()
    for client in range(clients):
        (directory / "personal" / f"client_{client}.safetensors").write_bytes(
            personal.get(client, b"")
        )
    return directory


def test_run_files_name_each_personalisation_by_client(tmp_path: Path, tiny_reference: Path) -> None:
    run = _track3_run(tmp_path / "run", tiny_reference, {1: b"x"}, 3)
    fields = run_files(run)
    assert {k: v.name for k, v in fields.items() if k.startswith("personal_")} == {
        "personal_0": "client_0.safetensors", "personal_1": "client_1.safetensors",
        "personal_2": "client_2.safetensors",
    }  # fmt: skip
    (run / "personal" / "notes.txt").write_text("x")
    with pytest.raises(Exception, match="holds only client_"):
        run_files(run)


def test_track3_is_scored_as_computed_by_hand(
    settings, teams: dict, tiny_reference: Path, personal_benchmark, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    import torch

    from pflkit.app import create_app

    data, global_anls = personal_benchmark
    tensors = _tensors(tiny_reference)
    frozen = next(name for name in sorted(tensors) if name.startswith("visual_embedding."))
    # client 0: the global values of a tensor under a declared-frozen prefix (its scores are the
    # global model's, and the upload is flagged); client 1: every answer empty.
    personal = {0: save({frozen: tensors[frozen]}),
                1: save({EMBEDDING: np.zeros_like(tensors[EMBEDDING])})}  # fmt: skip
    run = _track3_run(tmp_path / "run", tiny_reference, personal, 2,
                      method_options={"name": "finetune", "frozen": ["visual_embedding."]})  # fmt: skip
    scoring = settings.model_copy(update={"data_dir": data, "batch_size": BATCH})
    with LiveServer(scoring, app=create_app(scoring, migrate_database=False)) as server:
        accepted = submit(run, server=server.url, token=teams["alpha"])
        stored = Path(scoring.storage_dir) / "submissions" / accepted["id"] / "personal"
        assert sorted(p.name for p in stored.iterdir()) == ["client_0.safetensors",
                                                            "client_1.safetensors"]
        assert (stored / "client_1.safetensors").read_bytes() == personal[1]
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            runner = JobRunner(scoring, TaskQueue(scoring.queue, name=scoring.queue_name))
            assert runner.run(accepted["id"]) == "finished"
        finally:
            torch.set_num_threads(threads)
        organiser = httpx.get(accepted["url"], headers={"Authorization": f"Bearer {teams['org']}"}).json()
        own = httpx.get(accepted["url"], headers={"Authorization": f"Bearer {teams['alpha']}"}).json()
        board = httpx.get(f"{server.url}/api/v1/leaderboard", params={"track": 3}).json()
        page = httpx.get(f"{server.url}/leaderboard/submissions/{accepted['id']}").text
        plot = httpx.get(f"{server.url}/leaderboard/plots/track3.png")

    # by hand: client 0 = ACME Corp = question ids 1, 5, 9; client 1 = Globex = 3, 7, 11.
    client0, client1 = [1, 5, 9], [3, 7, 11]
    unseen = [q for q in range(1, QUESTIONS + 1) if q % 2 == 0]
    own0 = float(np.mean([global_anls[q] for q in client0]))
    assert own0 > 0 and np.mean([global_anls[q] for q in client1]) > 0
    expected = {
        "personal_anls": sum(global_anls[q] for q in client0) / 6,
        "personal_anls_std": float(np.std([own0, 0.0])),
        "personal_worst_client": 1,
        "personal_worst_anls": 0.0,
        "global_personal_anls": float(np.mean([global_anls[q] for q in client0 + client1])),
        "global_unseen_anls": float(np.mean([global_anls[q] for q in unseen])),
        "n_personal": 6,
    }
    results = organiser["results"]
    assert organiser["status"] == "finished", organiser
    for name, value in expected.items():
        assert results[name] == pytest.approx(value, abs=1e-9), name
        if isinstance(value, float):
            assert own["results"][name] == round(results[name], 4), name
    assert results["global_unseen_anls"] == pytest.approx(results["anls_out"], abs=1e-12)
    clients = {c["client"]: c for c in results["personal_clients"]}
    assert clients[0]["personal_anls"] == pytest.approx(own0, abs=1e-9)
    assert clients[0]["global_anls"] == pytest.approx(own0, abs=1e-9)
    assert clients[1]["personal_anls"] == 0.0 and clients[1]["n"] == 3
    report = results["personal_report"]
    assert report["frozen_replaced"] == {"0": 1} and "client(s) [0]" in report["flag"]
    assert report["personalised_clients"] == [0, 1]
    assert report["log_bytes"] == results["total_bytes"] == organiser["total_bytes"]

    (ranked,) = board["ranked"]
    assert ranked["id"] == accepted["id"] and ranked["rank"] == 1
    assert ranked["personal_anls"] == round(expected["personal_anls"], 4)
    assert ranked["global_unseen_anls"] == round(expected["global_unseen_anls"], 4)
    assert f"{expected['personal_anls']:.4f}" in page and "personal-clients" not in page
    assert "declared-frozen" not in page  # the flag is for the team and the organisers
    assert plot.status_code == 200 and plot.content.startswith(b"\x89PNG")
    with session_scope(scoring.db_url) as session:
        stored_clients = session.scalar(select(SubmissionFigure.document).where(
            SubmissionFigure.figure == "personal_clients"))
    assert [c["client"] for c in stored_clients] == [0, 1]
    assert all(secret_answer(i) not in json.dumps(organiser) for i in range(QUESTIONS))


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_worker_rejects_a_personalisation_against_the_reference(
    settings, teams: dict, tiny_reference: Path, personal_benchmark, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """The worker checks the stored files again against the reference model's tensors."""
    from tests.evaluator.test_worker import row_of, stored_submission

    data, _ = personal_benchmark
    scoring = settings.model_copy(update={"data_dir": data})
    submission_id = stored_submission(scoring, teams["alpha"],
                                      (tiny_reference / "model.safetensors").read_bytes(),
                                      meta=metadata(3, clients=2), log=fedavg_log())  # fmt: skip
    directory = Path(scoring.storage_dir) / "submissions" / submission_id / "personal"
    directory.mkdir()
    (directory / "client_0.safetensors").write_bytes(b"")
    runner = JobRunner(scoring, TaskQueue(scoring.queue, name=scoring.queue_name))
    assert runner.run(submission_id) == "rejected"
    reason = row_of(scoring, submission_id).reason
    assert reason == (
        "personal: no file for client(s) [1]; write one per client (an empty personalisation, "
        "a file without tensors, means the global model)"
    )


def test_declared_frozen_reads_only_lists_of_prefixes() -> None:
    assert declared_frozen({"method_options": {"frozen": ["visual_embedding.", 3, ""]}}) == (
        "visual_embedding.",
    )
    assert declared_frozen({"method_options": {"frozen": "visual"}}) == ()
    assert declared_frozen({"method_options": None}) == declared_frozen({}) == ()


def test_track3_is_refused_when_the_benchmark_lacks_the_client_files(
    settings, teams: dict, tiny_reference: Path, personal_benchmark, tmp_path: Path, caplog
) -> None:  # type: ignore[no-untyped-def]
    """An evaluator whose benchmark lacks a client's training file cannot tell that client's
    questions apart: it logs why at start-up and refuses track-3 uploads with a 422 that shows
    no server path (not a job that fails at scoring), and stores nothing."""
    import logging
    import shutil

    from pflkit.app import create_app

    data = tmp_path / "evaluator-only"
    shutil.copytree(personal_benchmark[0], data)
    (data / "participant" / "imdb_train_client_1.npy").unlink()
    scoring = settings.model_copy(update={"data_dir": data})
    run = _track3_run(tmp_path / "run", tiny_reference, {}, 2)
    with caplog.at_level(logging.ERROR, logger="evaluator.api"), LiveServer(
        scoring, app=create_app(scoring, migrate_database=False)
    ) as server:
        with pytest.raises(SubmitError) as refused:
            submit(run, server=server.url, token=teams["alpha"])
    assert "422" in str(refused.value)
    assert "cannot score track 3" in str(refused.value)
    assert str(data) not in str(refused.value)
    closed = [r.getMessage() for r in caplog.records if "track 3 is closed" in r.getMessage()]
    assert closed and "no client holds in training" in closed[0]
    assert not list((Path(scoring.storage_dir) / "submissions").glob("*"))
