"""The upload reads the metadata once, strictly, before any track-dependent part (issue 36).

Attacks: metadata naming ``track`` twice followed by ten large ``personal_k`` parts (the header
check read the last key while the strict parser, after the upload, refused the file: every
personalisation was written first); ``"track": true`` taken as track 1; an unknown wire format
passed at upload and was refused only by the worker.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from evaluator.storage import PersonalLimits, UploadError, receive_multipart
from tests.evaluator.conftest import LiveServer
from tests.evaluator.factories import details_log, fedavg_log, metadata, small_safetensors
from tests.evaluator.test_api import count_rows, upload

BOUNDARY = "pflkitboundary36"
PERSONAL_BYTES = 2 * 1024 * 1024


def _body(parts: list[tuple[str, bytes]]) -> bytes:
    """A multipart/form-data body of (field, content) parts, in order."""
    chunks = []
    for name, content in parts:
        chunks.append(
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"; '
            f'filename="{name}"\r\nContent-Type: application/octet-stream\r\n\r\n'.encode()
        )
        chunks.append(content + b"\r\n")
    chunks.append(f"--{BOUNDARY}--\r\n".encode())
    return b"".join(chunks)


async def _stream(body: bytes, size: int = 256 * 1024) -> AsyncIterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start:start + size]


def _receive(body: bytes, directory: Path) -> None:
    asyncio.run(receive_multipart(
        _stream(body), f"multipart/form-data; boundary={BOUNDARY}", directory,
        limits={"model": 1 << 20, "communication_log": 1 << 16, "communication_details": 1 << 16,
                "privacy": 8192, "metadata": 8192},
        max_total=64 << 20,
        personal=PersonalLimits(clients=10, max_file_bytes=8 << 20, max_total_bytes=64 << 20),
    ))  # fmt: skip


def test_a_duplicate_track_key_is_refused_before_any_personalisation_is_written(
    tmp_path: Path,
) -> None:
    meta = b'{"track": 1, "method": "fedavg", "track": 3}'
    parts = [("metadata", meta)] + [
        (f"personal_{k}", bytes([k]) * PERSONAL_BYTES) for k in range(10)
    ]
    directory = tmp_path / "incoming"
    with pytest.raises(UploadError) as caught:
        _receive(_body(parts), directory)
    assert caught.value.status_code == 422
    assert "metadata: key 'track' appears twice" in caught.value.message
    # Nothing of a personalisation reached the disk: the parse answered at the metadata's end.
    assert not (directory / "personal").exists()
    assert sorted(p.name for p in directory.iterdir()) == ["metadata.json"]


def test_the_same_metadata_with_one_track_key_accepts_the_personalisations(
    tmp_path: Path,
) -> None:
    """The control: the stream writes the personal parts when the metadata names track 3."""
    parts = [("metadata", b'{"track": 3, "method": "local-only"}')] + [
        (f"personal_{k}", bytes([k]) * 1024) for k in range(2)
    ] + [("model", b"x"), ("communication_log", b"x"), ("communication_details", b"x")]
    directory = tmp_path / "incoming"
    _receive(_body(parts), directory)
    assert sorted(p.name for p in (directory / "personal").iterdir()) == [
        "client_0.safetensors", "client_1.safetensors"]


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_duplicate_key_upload_over_http_is_422_and_leaves_nothing(
    live_server: LiveServer, teams: dict, settings, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    model = small_safetensors(tmp_path / "m.safetensors").read_bytes()
    extra = {f"personal_{k}": (f"client_{k}.safetensors", bytes([k]) * PERSONAL_BYTES,
                               "application/octet-stream") for k in range(10)}  # fmt: skip
    answer = upload(live_server.url, teams["alpha"], model=model,
                    meta='{"track": 1, "method": "fedavg", "track": 3}', extra=extra)  # fmt: skip
    assert answer.status_code == 422, answer.text
    assert "key 'track' appears twice" in answer.json()["detail"]
    assert count_rows(settings) == 0
    storage = Path(settings.storage_dir)
    assert list((storage / "incoming").iterdir()) == []
    assert list((storage / "submissions").iterdir()) == []


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("track", [True, "1", 1.0, 4])
def test_a_track_that_is_not_an_integer_of_the_competition_is_refused(
    live_server: LiveServer, teams: dict, settings, tmp_path: Path, track: object
) -> None:  # type: ignore[no-untyped-def]
    model = small_safetensors(tmp_path / "m.safetensors").read_bytes()
    meta = {**metadata(1), "track": track}
    answer = upload(live_server.url, teams["alpha"], model=model, meta=json.dumps(meta))
    assert answer.status_code == 422, answer.text
    assert "is not a track number" in answer.json()["detail"]
    assert "JSON integer" in answer.json()["detail"]
    assert count_rows(settings) == 0


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_an_unknown_wire_format_is_refused_at_upload(
    live_server: LiveServer, teams: dict, settings, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    import httpx

    model = small_safetensors(tmp_path / "m.safetensors").read_bytes()
    log = fedavg_log()
    files = {
        "model": ("model.safetensors", model, "application/octet-stream"),
        "communication_log": ("communication_log.csv", log, "text/csv"),
        "communication_details": ("communication_log.jsonl", details_log(log, wire="int2"),
                                  "application/jsonl"),
        "metadata": ("submission.json", json.dumps(metadata(1)), "application/json"),
    }  # fmt: skip
    answer = httpx.post(f"{live_server.url}/api/v1/submissions", files=files,
                        headers={"Authorization": f"Bearer {teams['alpha']}"}, timeout=60)  # fmt: skip
    assert answer.status_code == 422, answer.text
    detail = answer.json()["detail"]
    assert detail.startswith("communication_details: line 1:")
    assert "'int2' has no size formula" in detail and "fp32, nf4" in detail
    assert count_rows(settings) == 0
