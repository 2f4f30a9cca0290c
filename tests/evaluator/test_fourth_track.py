"""Tracks are data: a fourth track registered by this test alone, with an upload part and a
ranking of its own, goes from ``pflkit submit``'s upload (the real HTTP server on localhost)
through the worker to its section of the leaderboard page, with no change to the kit.

The toy track needs the parts every track needs plus ``notes`` (``notes.json``, a part the
contract did not have), is scored by the worker like any track (plus a scoring step for its
part) and ranks on test accuracy, highest first, among the submissions whose test ANLS reaches
a threshold of its own (``track4_threshold`` in ``benchmark.json``), not track 1's."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx
import pytest

from benchmark.submission_contract import PARTS, Part
from benchmark.threshold import thresholds_in_force
from benchmark.tracks import TRACKS, Track, common_parts
from evaluator.client import run_files, submit
from evaluator.queue import TaskQueue
from evaluator.readiness import threshold_problems
from evaluator.worker import JobRunner
from leaderboard.ranking import (
    RANKINGS,
    Ranked,
    Row,
    Table,
    TrackResult,
    Unranked,
    exclusion_reason,
)
from tests.evaluator.conftest import LiveServer
from tests.evaluator.factories import metadata, write_benchmark, write_run

NOTES = Part(
    name="notes",
    run_path="notes.json",
    stored_name="notes.json",
    content_type="application/json",
    description="the team's notes",
    limit_setting="max_json_bytes",
)


TOY_THRESHOLD = 0.0


def rank_by_accuracy(rows: Sequence[Row], track: Track, threshold: float | None,
                     all_submissions: bool) -> TrackResult:  # fmt: skip
    """The track's scored submissions at or above its ANLS threshold, highest accuracy first."""
    threshold = track.threshold if threshold is None else threshold

    def reason(row: Row) -> str | None:
        if exclusion_reason(row) is None and row.anls < threshold:
            return f"ANLS {row.anls:.4f} below the threshold {threshold:.4f}"
        return exclusion_reason(row)

    table = Table(title=f"Track {track.number}: {track.name}")
    mine = [row for row in rows if row.track == track.number]
    table.unranked = [Unranked(row, reason(row)) for row in mine if reason(row) is not None]
    valid = [row for row in mine if reason(row) is None]
    ordered = sorted(valid, key=lambda row: (-row.accuracy, row.created_at, row.id))
    table.ranked = [Ranked(rank, row) for rank, row in enumerate(ordered, start=1)]
    return TrackResult(track, {None: table}, table.unranked, threshold)


@pytest.fixture
def toy_track(monkeypatch: pytest.MonkeyPatch) -> Iterator[Track]:
    """Track 4 with its part and its ranking, registered for this test only."""
    monkeypatch.setitem(PARTS, NOTES.name, NOTES)
    track = Track(number=4, name="toy", ranking="accuracy", parts=(*common_parts(), NOTES.name),
                  title="toy accuracy", threshold=0.5,
                  threshold_key="track4_threshold")  # fmt: skip
    monkeypatch.setitem(TRACKS, track.number, track)
    monkeypatch.setitem(RANKINGS, track.ranking, rank_by_accuracy)
    yield track


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
    (ranked,) = board["ranked"]
    assert ranked["id"] == accepted["id"] and ranked["rank"] == 1
    assert ranked["accuracy"] == result["accuracy"]
    assert "4,,1,alpha,toy-method," in csv
    section = page.split('<section id="track4">', 1)[1].split("</section>", 1)[0]
    assert "<h1>Track 4: toy accuracy</h1>" in section
    assert "Ranked by accuracy." in section
    assert f'<tr data-id="{accepted["id"]}">' in section and "toy-method" in section
    assert f"{result['accuracy']:.4f}" in section
    assert plot.status_code == 404  # the toy track has no plot
    assert 'id="track1-ranked"' in page and 'id="track3-ranked"' in page
