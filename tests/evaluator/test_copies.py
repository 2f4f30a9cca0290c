"""Identical checkpoints (the digest of their tensors, not of their files) within a team and across
teams, under both copy policies."""

from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path

import pytest
from sqlalchemy import select

from evaluator import crud
from evaluator.core.db import session_scope
from evaluator.tables import Status, Submission
from tests.evaluator.conftest import LiveServer
from tests.evaluator.factories import small_safetensors
from tests.evaluator.test_api import count_rows, upload


def _row(settings, submission_id: str) -> Submission:  # type: ignore[no-untyped-def]
    with session_scope(settings.db_url) as session:
        return session.scalar(select(Submission).where(Submission.id == submission_id))


def _digest(path: Path) -> str:
    """The copy policy's digest of a checkpoint's tensors."""
    from evaluator.validation.tensor_digest import tensor_digest

    return tensor_digest(path, max_header_bytes=1 << 20, max_tensors=1000)


def _used(settings, token_team: str) -> int:  # type: ignore[no-untyped-def]
    from evaluator.tables import Team

    with session_scope(settings.db_url) as session:
        team_id = session.scalar(select(Team.id).where(Team.name == token_team))
        return crud.used_quota(session, team_id=team_id, now=dt.datetime.now(dt.UTC))


def test_same_team_resubmission_is_refused_without_using_quota(
    live_server: LiveServer, teams: dict, tmp_path: Path, settings
) -> None:  # type: ignore[no-untyped-def]
    model = small_safetensors(tmp_path / "m.safetensors").read_bytes()
    first = upload(live_server.url, teams["alpha"], model=model)
    assert first.status_code == 202
    original = first.json()["id"]
    assert _row(settings, original).model_sha256 == _digest(tmp_path / "m.safetensors")
    again = upload(live_server.url, teams["alpha"], model=model)
    assert again.status_code == 409
    assert f"identical to your submission {original}" in again.json()["detail"]
    assert "quota is unchanged" in again.json()["detail"]
    assert count_rows(settings) == 1 and _used(settings, "alpha") == 1
    assert [p.name for p in (Path(settings.storage_dir) / "submissions").iterdir()] == [original]
    assert list((Path(settings.storage_dir) / "incoming").iterdir()) == []
    # Once the original was rejected, the same checkpoint may be sent again.
    with session_scope(settings.db_url) as session:
        crud.transition(session, submission_id=original, from_status=Status.QUEUED,
                        to_status=Status.REJECTED, detail="test")  # fmt: skip
    assert upload(live_server.url, teams["alpha"], model=model).status_code == 202
    # The tracks are separate competitions: the same checkpoint may be entered in track 2.
    from tests.evaluator.factories import declaration, metadata

    other_track = upload(live_server.url, teams["alpha"], model=model, meta=metadata(2),
                         privacy=declaration())  # fmt: skip
    assert other_track.status_code == 202, other_track.text


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_another_teams_copy_is_refused_by_default(
    live_server: LiveServer, teams: dict, tmp_path: Path, settings
) -> None:  # type: ignore[no-untyped-def]
    model = small_safetensors(tmp_path / "m.safetensors").read_bytes()
    assert upload(live_server.url, teams["alpha"], model=model).status_code == 202
    copy = upload(live_server.url, teams["beta"], model=model)
    assert copy.status_code == 409 and "another team submitted earlier" in copy.json()["detail"]
    assert "alpha" not in copy.json()["detail"]  # the original's team is not revealed
    assert count_rows(settings) == 1 and _used(settings, "beta") == 0
    other = small_safetensors(tmp_path / "n.safetensors", variant=1).read_bytes()
    assert upload(live_server.url, teams["beta"], model=other).status_code == 202


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_flag_policy_accepts_and_marks_the_copy(teams: dict, tmp_path: Path, settings) -> None:  # type: ignore[no-untyped-def]
    flagging = settings.model_copy(update={"copy_policy": "flag"})
    model = small_safetensors(tmp_path / "m.safetensors").read_bytes()
    with LiveServer(flagging) as server:
        original = upload(server.url, teams["alpha"], model=model).json()["id"]
        copy = upload(server.url, teams["beta"], model=model)
        assert copy.status_code == 202
        assert upload(server.url, teams["alpha"], model=model).status_code == 409
    row = _row(settings, copy.json()["id"])
    assert row.copy_of == original and row.copy_of != row.id
    with session_scope(settings.db_url) as session:
        detail = crud.get_submission(session, submission_id=row.id).events[-1].detail
    assert detail == f"upload complete; flagged: identical checkpoint to submission {original}"


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_two_teams_racing_the_same_checkpoint_on_postgresql(
    live_server: LiveServer, teams: dict, tmp_path: Path, settings
) -> None:  # type: ignore[no-untyped-def]
    """Uploads of one checkpoint by two teams at the same instant: exactly one is accepted."""
    import threading

    for attempt in range(3):  # the quota is 3, and refused copies use none
        model = small_safetensors(tmp_path / f"r{attempt}.safetensors", variant=attempt)
        payload = model.read_bytes()
        barrier = threading.Barrier(2)
        codes: dict[str, int] = {}

        def send(team: str, payload: bytes = payload, barrier=barrier, codes=codes) -> None:  # type: ignore[no-untyped-def]
            barrier.wait()
            codes[team] = upload(live_server.url, teams[team], model=payload).status_code

        racers = [threading.Thread(target=send, args=(team,)) for team in ("alpha", "beta")]
        for racer in racers:
            racer.start()
        for racer in racers:
            racer.join(timeout=60)
        assert sorted(codes.values()) == [202, 409], codes
        with session_scope(settings.db_url) as session:
            live = session.scalars(
                select(Submission.id).where(
                    Submission.model_sha256 == _digest(model)
                )
            ).all()
        assert len(live) == 1


def test_track3_copies_compare_the_checkpoint_with_its_personalisations(
    live_server: LiveServer, teams: dict, tiny_reference: Path, settings
) -> None:  # type: ignore[no-untyped-def]
    from safetensors.numpy import load_file, save

    from tests.evaluator.factories import metadata, personal_parts

    model = (tiny_reference / "model.safetensors").read_bytes()
    tensors = load_file(str(tiny_reference / "model.safetensors"))
    name = sorted(tensors)[0]
    mine = personal_parts({2: save({name: tensors[name]})}, clients=10)
    theirs = personal_parts({}, clients=10)  # the same global model, no personalisation
    first = upload(live_server.url, teams["alpha"], model=model, meta=metadata(3), extra=mine)
    second = upload(live_server.url, teams["beta"], model=model, meta=metadata(3), extra=theirs)
    assert (first.status_code, second.status_code) == (202, 202), second.text
    fingerprints = {_row(settings, r.json()["id"]).model_sha256 for r in (first, second)}
    assert len(fingerprints) == 2 and hashlib.sha256(model).hexdigest() not in fingerprints
    again = upload(live_server.url, teams["alpha"], model=model, meta=metadata(3), extra=mine)
    assert again.status_code == 409 and "identical" in again.json()["detail"]
    assert count_rows(settings) == 2


def _resave(source: Path, target: Path, *, metadata: dict[str, str], reverse: bool) -> bytes:
    """The same tensors written again with another ``__metadata__`` (and, with ``reverse``,
    another tensor order in the header and the data region): other bytes, same checkpoint."""
    import json
    import struct

    from safetensors.numpy import load_file, save_file

    tensors = load_file(str(source))
    names = sorted(tensors, reverse=reverse)
    if not reverse:
        save_file({name: tensors[name] for name in names}, str(target), metadata=metadata)
        return target.read_bytes()
    # safetensors sorts on write; lay the file out by hand in reverse order.
    header: dict = {"__metadata__": metadata}
    data, offset = b"", 0
    for name in names:
        raw = tensors[name].tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(raw)]}  # fmt: skip
        data, offset = data + raw, offset + len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    target.write_bytes(struct.pack("<Q", len(text)) + text + data)
    return target.read_bytes()


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("reverse", [False, True], ids=["new-metadata", "new-tensor-order"])
def test_a_copy_with_a_new_header_is_the_same_checkpoint(
    live_server: LiveServer, teams: dict, tmp_path: Path, settings, reverse: bool
) -> None:  # type: ignore[no-untyped-def]
    """Issue 36: another team's checkpoint re-saved with other header bytes is refused."""
    original = small_safetensors(tmp_path / "m.safetensors")
    copy = _resave(original, tmp_path / "copy.safetensors",
                   metadata={"format": "pt", "team": "beta"}, reverse=reverse)  # fmt: skip
    assert copy != original.read_bytes()
    assert hashlib.sha256(copy).hexdigest() != hashlib.sha256(original.read_bytes()).hexdigest()
    assert upload(live_server.url, teams["alpha"], model=original.read_bytes()).status_code == 202
    refused = upload(live_server.url, teams["beta"], model=copy)
    assert refused.status_code == 409, refused.text
    assert "identical to one another team submitted earlier" in refused.json()["detail"]
    assert count_rows(settings) == 1 and _used(settings, "beta") == 0
    # One value changed is another checkpoint, whatever the header.
    other = small_safetensors(tmp_path / "n.safetensors", variant=1)
    assert upload(live_server.url, teams["beta"], model=other.read_bytes()).status_code == 202
