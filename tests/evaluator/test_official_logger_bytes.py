"""The worker keeps the official logger's byte count a run declares beside its own tally.

A real `pflkit train` run (LoRA with NF4 on the wire, one round on the `tiny` benchmark from a
small reference model) is stored as the API stores it and scored by the real worker, on SQLite
and on PostgreSQL when it runs. ``official_logger_total_bytes`` (what the official starter kit's
logger would have counted, 4 bytes per value) is kept as declared and shown in the API view;
``total_bytes`` stays the evaluator's tally of the log, which ranks track 1. A missing or
malformed declaration leaves the column empty without failing the submission.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from baselines.cli import train
from evaluator import crud
from evaluator.core.db import session_scope
from evaluator.queue import TaskQueue
from evaluator.schemas import SubmissionPublic
from evaluator.worker import JobRunner
from tests.evaluator.factories import store_run
from tests.small_model import save_small_reference


@pytest.fixture(scope="module")
def lora_nf4_run(tmp_path_factory, tiny_benchmark: Path) -> Path:  # type: ignore[no-untyped-def]
    """One round of `lora-nf4` from a random reference small enough to train in seconds."""
    from benchmark.data import load_split

    root = tmp_path_factory.mktemp("official-bytes")
    reference = save_small_reference(load_split(tiny_benchmark, "train", client=0),
                                     root / "reference", vocab_size=200, max_answer_tokens=4)
    run = root / "run"
    result = CliRunner().invoke(train, [
        "--method", "lora-nf4", "--data", str(tiny_benchmark), "--out", str(run),
        "--base", str(reference), "--rounds", "1", "--local-epochs", "1", "--val-limit", "0",
        "--threads", "1", "--no-progress", "--clients-per-round", "1"])
    assert result.exit_code == 0, result.output
    return run


@pytest.fixture
def runner(settings, tiny_benchmark: Path, lora_nf4_run: Path) -> JobRunner:  # type: ignore[no-untyped-def]
    """The real worker with the run's reference model, on the `tiny` benchmark's test split."""
    reference = json.loads((lora_nf4_run / "config.json").read_text())["base"]
    scoring = settings.model_copy(update={"data_dir": tiny_benchmark, "batch_size": 32,
                                          "reference_model": reference})  # fmt: skip
    return JobRunner(scoring, TaskQueue(scoring.queue, name=scoring.queue_name))


def _scored(runner: JobRunner, token: str, run: Path, meta: dict) -> SubmissionPublic:
    submission_id = store_run(runner, token, run, meta=meta)
    runner.run(submission_id)
    with session_scope(runner.settings.db_url) as session:
        row = crud.get_submission(session, submission_id=submission_id)
        assert (row.status, row.reason) == ("finished", None)
        return SubmissionPublic.from_row(row)


def test_the_declared_official_count_is_kept_beside_the_tally(
        runner: JobRunner, teams: dict, lora_nf4_run: Path) -> None:
    meta = json.loads((lora_nf4_run / "submission.json").read_text())
    view = _scored(runner, teams["alpha"], lora_nf4_run, meta)

    assert view.results.official_logger_total_bytes == meta["official_logger_total_bytes"]
    assert view.total_bytes == meta["total_bytes"]
    # NF4 sends about 4.5 bits a value, the official logger counted 32: different figures
    assert view.results.official_logger_total_bytes > 4 * view.total_bytes


@pytest.mark.parametrize("value", ["12345", -1, True, None])
def test_a_missing_or_malformed_declaration_leaves_it_empty(
        runner: JobRunner, teams: dict, lora_nf4_run: Path, value: object) -> None:
    meta = json.loads((lora_nf4_run / "submission.json").read_text())
    if value is None:
        del meta["official_logger_total_bytes"]
    else:
        meta["official_logger_total_bytes"] = value
    view = _scored(runner, teams["alpha"], lora_nf4_run, meta)

    assert view.results.official_logger_total_bytes is None
    assert view.total_bytes == meta["total_bytes"]
