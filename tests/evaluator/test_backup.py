"""Issue 46: a backup taken while uploads and scoring go on restores to a service that shows the
same leaderboard, the same submissions and the same tokens as the original at the backup's
moment, on SQLite and on PostgreSQL.

The original is the real API on localhost with two teams uploading distinct checkpoints all the
time and a real ``JobRunner`` scoring them; the backup is taken in the middle. "The original at
the backup's moment" is read inside the backup's own database snapshot (the ``reader`` of
``evaluator.backup.backup``: the leaderboard built by the leaderboard's code, and every
submission's organiser view), so it is exact although the original keeps changing. The restore
is the real ``pflkit evaluator restore`` command into an empty database and storage, and the
restored service is the real API again; a non-empty target is refused without ``--force``.
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import httpx
import pytest
from fastapi.encoders import jsonable_encoder

from benchmark.threshold import track1_threshold
from benchmark.tracks import TRACKS
from evaluator import crud
from evaluator.backup import backup
from evaluator.core.db import code_heads, get_engine, session_scope
from evaluator.queue import TaskQueue
from evaluator.schemas import SubmissionPublic
from evaluator.tables import Status
from evaluator.worker import JobRunner
from tests.evaluator.conftest import LiveServer, create_pg_database, drop_pg_database
from tests.evaluator.factories import write_benchmark
from tests.evaluator.service import pflkit
from tests.evaluator.test_api import upload

#: what only a service without a worker adds to a queued view (issue 46)
WAITING = ("waiting", "waiting_for_worker_since")


def _changed(model: bytes, seed: int) -> bytes:
    """A distinct checkpoint (one tensor shifted by ``seed``): not a copy of another."""
    from safetensors.numpy import load, save

    tensors = load(model)
    name = sorted(tensors)[0]
    tensors[name] = tensors[name] + float(seed)
    return save(tensors)


def _snapshot_reader(settings):  # type: ignore[no-untyped-def]
    """Read, inside the backup's snapshot, what the original showed then."""
    from leaderboard.board import as_json, build_board
    from leaderboard.source import load_rows

    def read(session) -> dict:  # type: ignore[no-untyped-def]
        threshold, origin = track1_threshold(settings.data_dir)
        rows = load_rows(session)
        boards = {}
        for best in (True, False):
            board = build_board(rows, threshold=threshold, threshold_source=origin,
                                all_submissions=not best, public=True)  # fmt: skip
            for track in TRACKS:
                boards[(track, best)] = jsonable_encoder(as_json(board, track=track))
        views = {}
        for row in crud.list_submissions(session, team_id=None, limit=10_000, offset=0):
            views[row.id] = SubmissionPublic.from_row(row, full_precision=True).model_dump(
                mode="json"
            )
        return {"boards": boards, "views": views}

    return read


class Load:
    """Uploads all the time and one worker scoring, until stopped.

    Each uploader alternates: the reference checkpoint from a team that has not sent it yet
    (accepted as a flagged copy, then finished with a score) and a changed checkpoint from its
    own team (accepted, then rejected by the worker: its log does not carry the change).
    """

    def __init__(self, server: LiveServer, settings, tokens: list[str], spare: list[str],
                 model: bytes) -> None:  # type: ignore[no-untyped-def]  # fmt: skip
        self.server, self.settings, self.tokens, self.model = server, settings, tokens, model
        self.spare = list(spare)
        self.stopped = threading.Event()
        self.accepted: list[str] = []
        self.errors: list[str] = []
        self.scored: dict[str, int] = {}
        self.threads = [
            threading.Thread(target=self._upload, args=(i, token), daemon=True)
            for i, token in enumerate(tokens)
        ] + [threading.Thread(target=self._score, daemon=True)]

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        for thread in self.threads:
            thread.join(timeout=60)

    def _upload(self, index: int, token: str) -> None:
        seed = 1 + index
        while not self.stopped.is_set():
            answers = [upload(self.server.url, token, model=_changed(self.model, seed))]
            seed += len(self.tokens)
            if self.spare:
                answers.append(upload(self.server.url, self.spare.pop(), model=self.model))
            for answer in answers:
                if answer.status_code == 202:
                    self.accepted.append(answer.json()["id"])
                else:
                    self.errors.append(f"{answer.status_code} {answer.text}")

    def _score(self) -> None:
        runner = JobRunner(self.settings, TaskQueue(self.settings.queue, name="unused"))
        while not self.stopped.is_set():
            with session_scope(self.settings.db_url) as session:
                waiting = crud.queued(session)
            for submission_id in waiting[:1]:
                outcome = runner.run(submission_id)
                self.scored[outcome] = self.scored.get(outcome, 0) + 1
            if not waiting:
                time.sleep(0.05)


def _restored_database(kind: str, tmp_path: Path) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'restored' / 'evaluator.db'}"
    return create_pg_database()


def _organiser_views(server: LiveServer, token: str, ids: list[str]) -> dict:
    views = {}
    with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
        for submission_id in ids:
            view = client.get(f"{server.url}/api/v1/submissions/{submission_id}").json()
            views[submission_id] = {k: v for k, v in view.items() if k not in WAITING}
    return views


def test_a_backup_under_load_restores_the_leaderboard_submissions_and_tokens(
    settings, teams: dict, tiny_reference: Path, tmp_path: Path, database_url: str
) -> None:  # type: ignore[no-untyped-def]
    from pflkit.app import create_app

    data = write_benchmark(tmp_path / "bench", questions=4)
    settings = settings.model_copy(
        update={
            "data_dir": data,
            "batch_size": 4,
            "daily_quota": 10_000,
            "lease_seconds": 60,
            "copy_policy": "flag",
        }
    )
    kind = "sqlite" if database_url.startswith("sqlite") else "postgresql"
    if kind == "postgresql" and not (shutil.which("pg_dump") and shutil.which("pg_restore")):
        pytest.skip("PostgreSQL's client tools (pg_dump, pg_restore) are not installed")
    model = (tiny_reference / "model.safetensors").read_bytes()
    destination = tmp_path / "backup"
    with session_scope(settings.db_url) as session:
        spare = [crud.create_team(session, name=f"team{i:02d}")[1] for i in range(40)]
    with LiveServer(settings, app=create_app(settings)) as server:
        with Load(server, settings, [teams["alpha"], teams["beta"]], spare, model) as load:
            deadline = time.monotonic() + 60
            while load.scored.get("finished", 0) < 2 or load.scored.get("rejected", 0) < 1:
                assert time.monotonic() < deadline and not load.errors, (
                    load.errors,
                    load.scored,
                    len(load.accepted),
                )
                time.sleep(0.05)
            started = time.monotonic()
            manifest = backup(settings, destination, reader=_snapshot_reader(settings))
            seconds = time.monotonic() - started
            accepted_at_backup = len(load.accepted)
            time.sleep(1.0)  # uploads and scoring go on after the snapshot
        assert not load.errors, load.errors
        print(f"{kind}: backup of {manifest['submissions']} submissions in {seconds:.2f} s")
    seen = manifest.pop("reader")
    assert len(load.accepted) > accepted_at_backup  # the load ran on after the backup
    with session_scope(settings.db_url) as session:
        total = len(crud.list_submissions(session, team_id=None, limit=10_000, offset=0))
    assert manifest["submissions"] == len(seen["views"]) < total
    statuses = {view["status"] for view in seen["views"].values()}
    assert Status.FINISHED.value in statuses, statuses
    assert manifest["database"] == kind and {manifest["migration"]} == code_heads()

    restored_url = _restored_database(kind, tmp_path)
    restored = settings.model_copy(
        update={"database_url": restored_url, "storage_dir": tmp_path / "restored" / "storage",
                "queue_url": f"sqlite:///{tmp_path / 'restored-queue.db'}"}
    )  # fmt: skip
    try:
        result = pflkit("evaluator", "restore", str(destination), "--db", restored_url,
                        "--storage", str(restored.storage_dir))  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert f"restored {manifest['teams']} teams and {manifest['submissions']} submissions" in (
            result.stdout
        )
        with LiveServer(restored, app=create_app(restored)) as server:
            for (track, best), board in seen["boards"].items():
                answer = httpx.get(f"{server.url}/api/v1/leaderboard",
                                   params={"track": track, "all": str(not best).lower()})  # fmt: skip
                assert answer.json() == board, (track, best)
            views = _organiser_views(server, teams["org"], sorted(seen["views"]))
            assert views == {
                i: {k: v for k, v in view.items() if k not in WAITING}
                for i, view in seen["views"].items()
            }
            # The same tokens, each seeing the same own submissions.
            for name, token in [("alpha", teams["alpha"]), ("beta", teams["beta"]),
                                *((f"team{i:02d}", spare[i]) for i in range(40))]:  # fmt: skip
                own = httpx.get(f"{server.url}/api/v1/submissions", params={"limit": 1000},
                                headers={"Authorization": f"Bearer {token}"})  # fmt: skip
                assert own.status_code == 200
                assert {s["id"] for s in own.json()["submissions"]} == {
                    i for i, v in seen["views"].items() if v["team"] == name
                }
            for submission_id, view in seen["views"].items():  # every file came back
                if view["status"] not in ("received", "failed"):
                    assert (restored.storage_dir / "submissions" / submission_id
                            / "model.safetensors").is_file()  # fmt: skip

        # A second restore into the now non-empty target is refused, then forced.
        refused = pflkit("evaluator", "restore", str(destination), "--db", restored_url,
                         "--storage", str(restored.storage_dir))  # fmt: skip
        assert refused.returncode == 1
        assert f"the target is not empty (the database holds {manifest['teams'] - 1} " in (
            refused.stderr
        )
        assert "pass --force to replace them" in refused.stderr
        forced = pflkit("evaluator", "restore", str(destination), "--db", restored_url,
                        "--storage", str(restored.storage_dir), "--force")  # fmt: skip
        assert forced.returncode == 0, forced.stderr
    finally:
        get_engine(restored_url).dispose()
        if kind == "postgresql":
            drop_pg_database(restored_url)


def test_backup_refuses_a_non_empty_destination_and_restore_a_non_backup(
    settings, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "file").write_text("x")
    env = {"PFLKIT_EVALUATOR_DATABASE_URL": settings.db_url,
           "PFLKIT_EVALUATOR_STORAGE_DIR": str(settings.storage_dir)}  # fmt: skip
    result = pflkit("evaluator", "backup", str(tmp_path / "taken"), env=env)
    assert result.returncode == 1
    assert "exists and is not empty: choose a new directory" in result.stderr
    result = pflkit("evaluator", "restore", str(tmp_path / "taken"), env=env)
    assert result.returncode == 1 and "is not a backup (no readable manifest.json)" in result.stderr
    result = pflkit("evaluator", "backup", str(tmp_path / "new"), env=env)
    assert result.returncode == 0, result.stderr
    assert not list(tmp_path.glob("new.partial-*"))
    assert "0 teams, 0 submissions" in result.stdout
