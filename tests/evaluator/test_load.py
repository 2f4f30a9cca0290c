"""Many concurrent requests against a real server on a small thread and connection pool."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from bench.loadtest import seed
from evaluator.core.db import get_engine
from tests.evaluator.conftest import LiveServer
from tests.evaluator.factories import details_log, fedavg_log, metadata, small_safetensors

READERS = 120


async def _read_and_upload(url: str, token: str, submission: str, models: list[bytes]) -> tuple:
    """``READERS`` concurrent status reads while every model is uploaded; the status codes."""
    limits = httpx.Limits(max_connections=READERS + len(models))
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
        auth = {"Authorization": f"Bearer {token}"}

        async def upload(model: bytes) -> int:
            files = {
                "model": ("model.safetensors", model, "application/octet-stream"),
                "communication_log": ("communication_log.csv", fedavg_log(), "text/csv"),
                "communication_details": ("communication_log.jsonl", details_log(), "text/plain"),
                "metadata": ("submission.json", json.dumps(metadata()), "application/json"),
            }
            response = await client.post("/api/v1/submissions", files=files, headers=auth)
            return response.status_code

        async def read() -> int:
            response = await client.get(f"/api/v1/submissions/{submission}", headers=auth)
            assert response.status_code != 200 or response.json()["id"] == submission
            return response.status_code

        uploads = [asyncio.create_task(upload(model)) for model in models]
        reads = await asyncio.gather(*(read() for _ in range(READERS)))
        return list(reads), list(await asyncio.gather(*uploads))


def test_readers_during_uploads_on_a_pool_of_two(settings, tmp_path) -> None:  # type: ignore[no-untyped-def]
    small = settings.model_copy(update={"api_threads": 2, "daily_quota": 10})
    token, submission = seed(small.db_url)
    models = [
        small_safetensors(tmp_path / f"m{i}.safetensors", variant=i).read_bytes() for i in range(3)
    ]
    with LiveServer(small) as server:
        engine = server.server.config.app.state.sessions.kw["bind"]
        assert engine.pool.size() == 2
        reads, uploads = asyncio.run(_read_and_upload(server.url, token, submission, models))
    assert reads == [200] * READERS
    assert uploads == [202] * len(models)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_pool_is_sized_from_the_thread_pool(database_url: str) -> None:
    assert get_engine(database_url, 7).pool.size() == 7
    assert get_engine(database_url).pool.size() == get_engine(database_url, 16).pool.size()
