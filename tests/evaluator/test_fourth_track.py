"""Tracks are data: a fourth track registered by this test alone, with an upload part and a
figure of its own, goes from ``pflkit submit``'s upload (the real HTTP server on localhost)
through the worker to its section of the leaderboard page, with no change to the kit.

The toy track needs the parts every track needs plus ``notes`` (``notes.json``, a part the
contract did not have), is scored by the worker like any track (plus a scoring step for its
part) and ranks on ``toy_miss_rate``, a figure no other track has (the share of test questions
not answered exactly, computed by the worker from its test scores as the figure declares),
lowest first, among the submissions whose test ANLS reaches a threshold of its own
(``track4_threshold`` in ``benchmark.json``), not track 1's. The figure needs no column and
no migration (``submission_figures``), and no ranking function (``Figure.better``).

What a kit track of this kind touches: ``benchmark/tracks.py`` (the ``Track`` and its
``Figure``), and for a part of its own ``benchmark/submission_contract.py`` (the ``Part``),
``evaluator/worker/steps.py`` (its scoring step) and ``evaluator/core/config.py`` (the part's
size limit): four files; this test registers all of it itself."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from benchmark.result_figures import Figure
from benchmark.submission_contract import PARTS, Part
from benchmark.threshold import thresholds_in_force
from benchmark.tracks import TRACKS, Track, common_parts
from evaluator.client import run_files, submit
from evaluator.core.db import session_scope
from evaluator.queue import TaskQueue
from evaluator.readiness import threshold_problems
from evaluator.tables import Submission, SubmissionFigure
from evaluator.worker import JobRunner
from leaderboard.ranking import RANKINGS, Row, rank_track
from tests.evaluator.conftest import LiveServer
from tests.evaluator.factories import metadata, write_benchmark, write_run

T0 = dt.datetime(2026, 5, 1, tzinfo=dt.UTC)

NOTES = Part(
    name="notes",
    run_path="notes.json",
    stored_name="notes.json",
    content_type="application/json",
    description="the team's notes",
    limit_setting="max_json_bytes",
)


TOY_THRESHOLD = 0.0
MISS_RATE = Figure("toy_miss_rate", label="miss rate", decimals=4, better="lower",
                   compute=lambda scores: 1 - scores.accuracy,
                   description="toy: the share of test questions not answered exactly")  # fmt: skip


def toy(**changes: object) -> Track:
    """Track 4: ranked on its own figure, lowest first, at or above its own ANLS threshold."""
    fields = {"number": 4, "name": "toy", "ranking": MISS_RATE.name,
              "parts": (*common_parts(), NOTES.name), "title": "toy miss rate",
              "threshold": 0.5, "threshold_key": "track4_threshold", "figures": (MISS_RATE,)}
    return Track(**{**fields, **changes})  # type: ignore[arg-type]  # fmt: skip


@pytest.fixture
def toy_track(monkeypatch: pytest.MonkeyPatch) -> Iterator[Track]:
    """Track 4 with its part and its figure, registered for this test only."""
    monkeypatch.setitem(PARTS, NOTES.name, NOTES)
    track = toy()
    monkeypatch.setitem(TRACKS, track.number, track)
    yield track


def test_a_track_ranks_on_its_own_figure_without_a_ranking_function(
    toy_track: Track,
) -> None:
    def row(id: str, team: str, miss: float | None, anls: float = 0.6, minute: int = 0) -> Row:
        return Row(id=id, team=team, track=4, method="m", status="finished", anls=anls,
                   created_at=T0 + dt.timedelta(minutes=minute), toy_miss_rate=miss)  # fmt: skip

    rows = [row("a", "A", 0.4), row("b", "B", 0.2), row("c", "C", 0.1, anls=0.49),
            row("d", "D", None), row("e", "A", 0.3, minute=1), row("t1", "E", 0.0)]  # fmt: skip
    rows[-1] = dataclasses.replace(rows[-1], track=1)
    assert toy_track.ranking not in RANKINGS
    result = rank_track(rows, toy_track, threshold=0.5)
    assert [e.row.id for e in result.tables[None].ranked] == ["b", "e"]
    assert {u.row.id: u.reason for u in result.unranked} == {
        "c": "ANLS 0.4900 below the threshold 0.5000", "d": "no miss rate"}
    assert [e.row.id for e in rank_track(rows, toy_track, all_submissions=True)
            .tables[None].ranked] == ["b", "e", "a"]  # fmt: skip
    with pytest.raises(ValueError, match="neither one of its figures nor a shared one"):
        toy(ranking="toy_hit_rate")
    with pytest.raises(LookupError, match="declare the figure's better end"):
        rank_track(rows, toy(figures=(dataclasses.replace(MISS_RATE, better=None),)))


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_fourth_track_goes_from_upload_to_its_leaderboard_section(
    settings, teams: dict, tiny_reference: Path, toy_track: Track, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from pflkit.app import create_app

    data = write_benchmark(tmp_path / "benchmark", questions=4)
    stated = json.loads((data / "benchmark.json").read_text())
    (data / "benchmark.json").write_text(json.dumps({**stated, "track4_threshold": TOY_THRESHOLD}))
    scoring = settings.model_copy(update={"data_dir": data, "batch_size": 4})
    run = write_run(tmp_path / "run", tiny_reference / "model.safetensors",
                    meta=metadata(toy_track.number, method="toy-method"))  # fmt: skip
    (run / NOTES.run_path).write_text(json.dumps({"note": "a toy submission"}))
    seen: list[dict] = []

    def read_notes(directory: Path, tally: object, meta: object) -> dict:
        seen.append(json.loads((directory / NOTES.stored_name).read_text()))
        return {}

    with LiveServer(scoring, app=create_app(scoring, migrate_database=False)) as server:
        without_notes = write_run(tmp_path / "bare", tiny_reference / "model.safetensors",
                                  meta=metadata(toy_track.number))  # fmt: skip
        refused = httpx.post(
            f"{server.url}/api/v1/submissions",
            headers={"Authorization": f"Bearer {teams['beta']}"},
            files={name: (path.name, path.read_bytes())
                   for name, path in run_files(without_notes).items()},
        )  # fmt: skip
        accepted = submit(run, server=server.url, token=teams["alpha"])
        stored = Path(scoring.storage_dir) / "submissions" / accepted["id"] / NOTES.stored_name
        assert json.loads(stored.read_text()) == {"note": "a toy submission"}
        runner = JobRunner(scoring, TaskQueue(scoring.queue, name=scoring.queue_name))
        runner.steps.part_steps[NOTES.name] = read_notes
        assert runner.run(accepted["id"]) == "finished"
        own = httpx.get(accepted["url"], headers={"Authorization": f"Bearer {teams['alpha']}"})
        board = httpx.get(f"{server.url}/api/v1/leaderboard", params={"track": 4}).json()
        csv = httpx.get(f"{server.url}/api/v1/leaderboard.csv", params={"track": 4}).text
        page = httpx.get(f"{server.url}/leaderboard").text
        detail = httpx.get(f"{server.url}/leaderboard/submissions/{accepted['id']}").text
        plot = httpx.get(f"{server.url}/leaderboard/plots/track4.png")

    # its own threshold, stated by the benchmark, checked against the base like track 1's
    assert thresholds_in_force(data) == {1: (0.8242, "setting"),
                                         4: (TOY_THRESHOLD, str(data / "benchmark.json"))}
    (problem,) = threshold_problems(thresholds_in_force(data), base_test_anls=0.3)
    assert problem.startswith("the track-4 threshold 0.0000 is at or below the base model's own")
    assert "track4_threshold in benchmark.json" in problem
    assert board["threshold"] == TOY_THRESHOLD
    assert board["threshold_source"] == str(data / "benchmark.json")
    assert refused.status_code == 422
    assert refused.json()["detail"] == "notes: track 4 needs the team's notes (notes.json)"
    assert seen == [{"note": "a toy submission"}]
    result = own.json()
    assert result["track"] == 4 and result["status"] == "finished", result
    assert result["accuracy"] is not None
    miss = result["results"]["toy_miss_rate"]
    assert miss == pytest.approx(1 - result["accuracy"], abs=1e-4)
    assert result["results"]["personal_anls"] is None  # another track's figure, not this one's
    (ranked,) = board["ranked"]
    assert ranked["id"] == accepted["id"] and ranked["rank"] == 1
    assert ranked["toy_miss_rate"] == miss and ranked["accuracy"] == result["accuracy"]
    assert "toy_miss_rate" in csv.splitlines()[0] and "4,,1,alpha,toy-method," in csv
    section = page.split('<section id="track4">', 1)[1].split("</section>", 1)[0]
    assert "<h1>Track 4: toy miss rate</h1>" in section
    assert "Ranked by miss rate, lower first, among submissions with test ANLS" in section
    assert f'<tr data-id="{accepted["id"]}">' in section and "toy-method" in section
    assert f"{miss:.4f}" in section
    assert "toy_miss_rate" not in Submission.__table__.c  # no column, no migration
    with session_scope(scoring.db_url) as session:
        stored_miss = session.scalar(select(SubmissionFigure.number).where(
            SubmissionFigure.submission_id == accepted["id"]))  # fmt: skip
    assert round(stored_miss, 4) == miss
    assert f"<td>miss rate</td><td class=\"num\">{miss:.4f}</td>" in detail
    assert plot.status_code == 404  # the toy track has no plot
    assert 'id="track1-ranked"' in page and 'id="track3-ranked"' in page
