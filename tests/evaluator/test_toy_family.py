"""A model family registered by this test alone is trained, uploaded, scored and ranked.

The toy family of ``tests/baselines/test_model_families.py`` (a text-only T5 in one module
written to a temporary folder) trains with ``pflkit train`` (in-process), its run is uploaded
with ``pflkit submit``'s client to the real server on localhost, the real worker checks it
against the organisers' reference of that family (``family_references``), binds it to its log,
scores it and the leaderboard page shows it with its family: no file of the kit changes.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from baselines.cli import train
from benchmark.model.random_init import init_checkpoint
from evaluator.client import submit
from evaluator.queue import TaskQueue
from evaluator.worker import JobRunner
from tests.baselines.test_model_families import TRAIN, toy_family  # noqa: F401 (a fixture)
from tests.evaluator.conftest import LiveServer


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_fourth_family_is_uploaded_scored_and_ranked(
    toy_family: None, settings, teams: dict, tiny_benchmark: Path, tmp_path: Path  # noqa: F811
) -> None:  # type: ignore[no-untyped-def]
    from pflkit.app import create_app

    base = init_checkpoint("tiny", tmp_path / "toy-base", family="toy-t5")
    run = tmp_path / "run"
    result = CliRunner().invoke(train, ["--data", str(tiny_benchmark), "--base", str(base),
                                        "--out", str(run), "--preset", "lora-nf4", *TRAIN],
                                catch_exceptions=False)  # fmt: skip
    assert result.exit_code == 0, result.output
    scoring = settings.model_copy(update={"data_dir": tiny_benchmark, "batch_size": 8,
                                          "family_references": {"toy-t5": str(base)}})  # fmt: skip
    with LiveServer(scoring, app=create_app(scoring, migrate_database=False)) as server:
        accepted = submit(run, server=server.url, token=teams["alpha"])
        runner = JobRunner(scoring, TaskQueue(scoring.queue, name=scoring.queue_name))
        assert runner.run(accepted["id"]) == "finished"
        own = httpx.get(accepted["url"], headers={"Authorization": f"Bearer {teams['alpha']}"})
        page = httpx.get(f"{server.url}/leaderboard").text
    scored = own.json()
    assert (scored["status"], scored["family"], scored["track"]) == ("finished", "toy-t5", 1)
    assert scored["anls"] is not None and scored["total_bytes"] > 0
    assert json.loads((run / "submission.json").read_text())["family"] == "toy-t5"
    assert f'data-id="{accepted["id"]}"' in page and "<td>toy-t5</td>" in page
