"""The per-team daily quota, enforced atomically under concurrent uploads."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from evaluator import crud
from evaluator.core.db import session_scope
from evaluator.tables import Status
from tests.evaluator.conftest import LiveServer
from tests.evaluator.factories import small_safetensors
from tests.evaluator.test_api import upload


def test_concurrent_uploads_respect_the_quota(
    live_server: LiveServer, teams: dict, tmp_path: Path, settings
) -> None:  # type: ignore[no-untyped-def]
    # A distinct checkpoint per upload: identical ones are refused as copies before the quota.
    models = [
        small_safetensors(tmp_path / f"m{i}.safetensors", variant=i).read_bytes()
        for i in range(20)
    ]
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(
            pool.map(lambda i: upload(live_server.url, teams["alpha"], model=models[i]), range(8))
        )
    codes = sorted(response.status_code for response in answers)
    assert codes == [202] * 3 + [429] * 5, [r.text for r in answers]
    assert "daily quota of 3" in next(r for r in answers if r.status_code == 429).json()["detail"]
    # Another team's quota is its own.
    assert upload(live_server.url, teams["beta"], model=models[8]).status_code == 202
    # Rejected and failed submissions do not count.
    accepted = [r.json()["id"] for r in answers if r.status_code == 202]
    with session_scope(settings.db_url) as session:
        assert crud.transition(
            session,
            submission_id=accepted[0],
            from_status=Status.QUEUED,
            to_status=Status.REJECTED,
            detail="test rejection",
        )
        assert crud.transition(
            session,
            submission_id=accepted[1],
            from_status=Status.QUEUED,
            to_status=Status.FAILED,
            detail="test failure",
        )
    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = list(
            pool.map(
                lambda i: upload(live_server.url, teams["alpha"], model=models[i]), range(10, 14)
            )
        )
    assert sorted(r.status_code for r in answers) == [202, 202, 429, 429]
