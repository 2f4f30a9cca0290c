"""The API on a real localhost server: auth, upload, storage, visibility, bad-input corpus."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from evaluator.core.db import session_scope
from evaluator.tables import Submission
from tests.evaluator.conftest import LiveServer
from tests.evaluator.factories import (
    LOG_HEADER,
    declaration,
    details_log,
    fedavg_log,
    metadata,
    personal_parts,
    pickle_bomb,
    truncated,
)


def upload(
    server: str,
    token: str | None,
    *,
    model: bytes,
    log: str | None = None,
    meta: dict | str | None = None,
    privacy: dict | str | None = None,
    extra: dict | None = None,
) -> httpx.Response:
    """POST one submission as multipart."""
    files: dict = {
        "model": ("model.safetensors", model, "application/octet-stream"),
        "communication_log": (
            "communication_log.csv",
            log if log is not None else fedavg_log(),
            "text/csv",
        ),
        "communication_details": (
            "communication_log.jsonl",
            details_log(log if log is not None else fedavg_log()),
            "application/jsonl",
        ),
        "metadata": (
            "submission.json",
            meta if isinstance(meta, str) else json.dumps(meta or metadata()),
            "application/json",
        ),
    }
    if privacy is not None:
        files["privacy"] = (
            "privacy.json",
            privacy if isinstance(privacy, str) else json.dumps(privacy),
            "application/json",
        )
    files.update(extra or {})
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.post(f"{server}/api/v1/submissions", files=files, headers=headers, timeout=60)


def count_rows(settings) -> int:  # type: ignore[no-untyped-def]
    with session_scope(settings.db_url) as session:
        return session.scalar(select(func.count(Submission.id))) or 0


def assert_nothing_stored(settings) -> None:  # type: ignore[no-untyped-def]
    assert count_rows(settings) == 0
    for sub in ("incoming", "submissions"):
        assert list((Path(settings.storage_dir) / sub).iterdir()) == []


@pytest.fixture
def model_bytes(tiny_reference: Path) -> bytes:
    return (tiny_reference / "model.safetensors").read_bytes()


def test_healthz_and_openapi(live_server: LiveServer) -> None:
    response = httpx.get(f"{live_server.url}/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok"}
    schema = httpx.get(f"{live_server.url}/openapi.json").json()
    assert {"/healthz", "/api/v1/submissions", "/api/v1/submissions/{submission_id}"} <= set(
        schema["paths"]
    )
    body = schema["paths"]["/api/v1/submissions"]["post"]["requestBody"]["content"]
    assert "multipart/form-data" in body


def test_upload_is_stored_queued_and_visible_to_its_team(
    live_server: LiveServer, teams: dict, model_bytes: bytes, settings
) -> None:  # type: ignore[no-untyped-def]
    response = upload(live_server.url, teams["alpha"], model=model_bytes)
    assert response.status_code == 202, response.text
    accepted = response.json()
    assert accepted["status"] == "queued"
    stored = Path(settings.storage_dir) / "submissions" / accepted["id"]
    assert (stored / "model.safetensors").read_bytes() == model_bytes
    assert (stored / "communication_log.csv").read_text() == fedavg_log()
    assert list((Path(settings.storage_dir) / "incoming").iterdir()) == []

    mine = httpx.get(accepted["url"], headers={"Authorization": f"Bearer {teams['alpha']}"}).json()
    assert mine["status"] == "queued" and mine["team"] == "alpha" and mine["track"] == 1
    assert mine["anls"] is None and mine["total_bytes"] is None
    assert [t["to_status"] for t in mine["transitions"]] == ["received", "queued"]
    assert mine["transitions"][1]["at"] >= mine["transitions"][0]["at"]

    other = httpx.get(accepted["url"], headers={"Authorization": f"Bearer {teams['beta']}"})
    assert other.status_code == 404
    organiser = httpx.get(accepted["url"], headers={"Authorization": f"Bearer {teams['org']}"})
    assert organiser.status_code == 200
    listing = httpx.get(
        f"{live_server.url}/api/v1/submissions",
        headers={"Authorization": f"Bearer {teams['beta']}"},
    ).json()
    assert listing["submissions"] == []
    listing = httpx.get(
        f"{live_server.url}/api/v1/submissions",
        headers={"Authorization": f"Bearer {teams['alpha']}"},
    ).json()
    assert [s["id"] for s in listing["submissions"]] == [accepted["id"]]


@pytest.mark.parametrize("token", [None, "pfl_wrong-token", ""])
def test_missing_or_wrong_token(
    live_server: LiveServer, teams: dict, model_bytes: bytes, token, settings
) -> None:  # type: ignore[no-untyped-def]
    response = upload(live_server.url, token, model=model_bytes)
    assert response.status_code == 401
    assert "token" in response.json()["detail"]
    assert response.headers["www-authenticate"] == "Bearer"
    assert httpx.get(f"{live_server.url}/api/v1/submissions").status_code == 401
    assert_nothing_stored(settings)


def test_participant_cannot_use_organiser_endpoints(live_server: LiveServer, teams: dict) -> None:
    response = httpx.post(
        f"{live_server.url}/api/v1/teams",
        json={"name": "gamma"},
        headers={"Authorization": f"Bearer {teams['alpha']}"},
    )
    assert response.status_code == 403
    response = httpx.post(
        f"{live_server.url}/api/v1/teams",
        json={"name": "gamma"},
        headers={"Authorization": f"Bearer {teams['org']}"},
    )
    assert response.status_code == 201
    token = response.json()["token"]
    assert (
        httpx.get(
            f"{live_server.url}/api/v1/submissions", headers={"Authorization": f"Bearer {token}"}
        ).status_code
        == 200
    )


def test_a_write_is_committed_before_its_answer(live_server: LiveServer, teams: dict) -> None:
    """A new team's token works on the very next request: the route's session commits before
    the response goes out, not after (FastAPI's default scope for a ``yield`` dependency)."""
    organiser = {"Authorization": f"Bearer {teams['org']}"}
    with httpx.Client(base_url=live_server.url) as client:
        for index in range(25):
            created = client.post("/api/v1/teams", json={"name": f"race{index}"}, headers=organiser)
            assert created.status_code == 201
            token = created.json()["token"]
            listed = client.get("/api/v1/submissions", headers={"Authorization": f"Bearer {token}"})
            assert listed.status_code == 200, f"team {index}: {listed.status_code} {listed.text}"


def _personal_corpus(marker: Path, reference: Path) -> dict[str, tuple[dict, int, str]]:
    """Bad track-3 uploads (the settings' benchmark has the default K = 10 clients)."""
    import numpy as np
    from safetensors.numpy import load_file, save

    model = (reference / "model.safetensors").read_bytes()
    tensors = load_file(str(reference / "model.safetensors"))
    name = min((n for n in tensors if tensors[n].size > 1), key=lambda n: tensors[n].size)
    nan = tensors[name].copy()
    nan.flat[0] = np.nan

    def track3(files: dict[int, bytes], *, drop: int | None = None, track: int = 3) -> dict:
        parts = personal_parts(files, clients=10)
        parts.pop(f"personal_{drop}", None)
        return {"model": model, "meta": metadata(track), "extra": parts}

    return {
        "personalisation missing for a client": (track3({}, drop=9), 422,
                                                 "personal: no file for client(s) [9]"),
        "personalisation of a client out of range": (track3({12: b""}), 422,
                                                     "personal_12: client 12 is out of range"),
        "personalisation with NaN": (track3({4: save({name: nan})}), 422,
                                     f"personal: personal/client_4.safetensors: tensor(s) {name} "
                                     "hold NaN or infinite values"),
        "personalisation with a wrong shape": (
            track3({2: save({name: tensors[name].reshape(-1)[:-1].copy()})}), 422,
            "personal: personal/client_2.safetensors",
        ),
        "personalisation with an unknown tensor": (
            track3({0: save({"lm.extra": tensors[name]})}), 422, "lm.extra"),
        "personalisation that is a pickle": (track3({1: pickle_bomb(marker)}), 422,
                                             "personal/client_1.safetensors: not a safetensors"),
        "track 3 without personalisations": ({"model": model, "meta": metadata(3)}, 422,
                                             "personal: track 3 needs per-client"),
        "personalisations on a track-1 submission": (track3({}, track=1), 422,
                                                     "track 1 submissions carry no personal"),
    }  # fmt: skip


def _corpus(tmp_path: Path, reference: Path) -> dict[str, tuple[dict, int, str]]:
    """Bad uploads refused at once: name -> (upload kwargs, status, words of the message)."""
    marker = tmp_path / "pickle-payload-ran"
    model = (reference / "model.safetensors").read_bytes()
    no_unit = declaration()
    del no_unit["unit"]
    return _personal_corpus(marker, reference) | {
        "pickle renamed .safetensors": (
            {"model": pickle_bomb(marker)},
            422,
            "not a safetensors file",
        ),
        "truncated safetensors": (
            {"model": truncated(reference / "model.safetensors")},
            422,
            "truncated",
        ),
        "negative bytes": (
            {"model": model, "log": f"{LOG_HEADER}\n0,-1,0,-10\n"},
            422,
            "amount_of_bytes must be positive",
        ),
        "unknown client id": (
            {"model": model, "log": f"{LOG_HEADER}\n0,-1,0,10\n0,-1,42,10\n"},
            422,
            "receiver 42 is not the server",
        ),
        "declaration with missing fields": (
            {"model": model, "meta": metadata(2), "privacy": no_unit},
            422,
            "unit: missing",
        ),
        "track 2 without declaration": (
            {"model": model, "meta": metadata(2)},
            422,
            "privacy declaration",
        ),
        "metadata without track": ({"model": model, "meta": {"method": "x"}}, 422, "track"),
        "metadata not JSON": ({"model": model, "meta": "{not json"}, 422, "not valid UTF-8 JSON"),
        "unknown form field": (
            {"model": model, "extra": {"weights.pkl": ("w", b"x")}},
            422,
            "unknown form field",
        ),
        "amount with two minus signs": (
            {"model": model, "log": f"{LOG_HEADER}\n0,-1,0,--5\n"},
            422,
            "ASCII digits",
        ),
        "amount as a superscript digit": (
            {"model": model, "log": f"{LOG_HEADER}\n0,-1,0,\u00b2\n"},
            422,
            "ASCII digits",
        ),
        "amount in Arabic-Indic digits": (
            {"model": model, "log": f"{LOG_HEADER}\n0,-1,0,\u0665\u0660\n"},
            422,
            "ASCII digits",
        ),
        "metadata with a 5000-digit integer": (
            {"model": model, "meta": '{"track": 1, "method": "x", "n": ' + "9" * 5000 + "}"},
            422,
            "numbers may have at most 32 characters",
        ),
        "metadata nested 600 levels in an unknown key": (
            {"model": model, "meta": '{"track": 1, "method": "x", "extra": '
             + "[" * 600 + "]" * 600 + "}"},
            422,
            "at most 16 levels",
        ),
        "privacy with a 400-digit clipping_norm": (
            {"model": model, "meta": metadata(2),
             "privacy": json.dumps(declaration()).replace('"clipping_norm": 0.5',
                                                          '"clipping_norm": ' + "7" * 400)},
            422,
            "privacy: a number of 400 characters",
        ),
        "privacy with a 5000-digit integer": (
            {"model": model, "meta": metadata(2),
             "privacy": json.dumps(declaration()).replace('"rounds": 2', '"rounds": ' + "1" * 5000)},
            422,
            "privacy: a number of 5000 characters",
        ),
    }


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize(
    "case",
    [
        "pickle renamed .safetensors",
        "truncated safetensors",
        "negative bytes",
        "unknown client id",
        "declaration with missing fields",
        "track 2 without declaration",
        "metadata without track",
        "metadata not JSON",
        "unknown form field",
        "amount with two minus signs",
        "amount as a superscript digit",
        "amount in Arabic-Indic digits",
        "metadata with a 5000-digit integer",
        "metadata nested 600 levels in an unknown key",
        "privacy with a 400-digit clipping_norm",
        "privacy with a 5000-digit integer",
        "personalisation missing for a client",
        "personalisation of a client out of range",
        "personalisation with NaN",
        "personalisation with a wrong shape",
        "personalisation with an unknown tensor",
        "personalisation that is a pickle",
        "track 3 without personalisations",
        "personalisations on a track-1 submission",
    ],
)
def test_bad_input_corpus_is_refused_and_nothing_stored(
    live_server: LiveServer, teams: dict, case: str, tmp_path: Path, tiny_reference: Path, settings
) -> None:  # type: ignore[no-untyped-def]
    kwargs, status, words = _corpus(tmp_path, tiny_reference)[case]
    response = upload(live_server.url, teams["alpha"], **kwargs)
    assert response.status_code == status, response.text
    assert words in response.json()["detail"]
    assert_nothing_stored(settings)
    assert not (tmp_path / "pickle-payload-ran").exists()


def test_missing_part_and_wrong_content_type(
    live_server: LiveServer, teams: dict, settings
) -> None:  # type: ignore[no-untyped-def]
    auth = {"Authorization": f"Bearer {teams['alpha']}"}
    response = httpx.post(
        f"{live_server.url}/api/v1/submissions",
        headers=auth,
        files={"metadata": ("m.json", json.dumps(metadata()))},
    )
    assert response.status_code == 422
    assert "missing form fields: model, communication_log" in response.json()["detail"]
    response = httpx.post(f"{live_server.url}/api/v1/submissions", headers=auth, json=metadata())
    assert response.status_code == 415
    assert_nothing_stored(settings)


def test_the_detailed_log_is_required_and_must_repeat_the_csv(
    live_server: LiveServer, teams: dict, settings, model_bytes: bytes
) -> None:  # type: ignore[no-untyped-def]
    files = {
        "model": ("model.safetensors", model_bytes),
        "communication_log": ("communication_log.csv", fedavg_log()),
        "metadata": ("submission.json", json.dumps(metadata())),
    }
    response = httpx.post(f"{live_server.url}/api/v1/submissions", files=files,
                          headers={"Authorization": f"Bearer {teams['alpha']}"})  # fmt: skip
    assert response.status_code == 422
    assert response.json()["detail"] == "missing form fields: communication_details"
    other = details_log(fedavg_log(nbytes=999))
    response = upload(live_server.url, teams["alpha"], model=model_bytes,
                      extra={"communication_details": ("communication_log.jsonl", other)})  # fmt: skip
    assert response.status_code == 422
    assert response.json()["detail"] == (
        "communication_details: line 1 is 0,-1,0,999 but row 1 of the CSV log is 0,-1,0,1000; "
        "upload the two logs of one run"
    )
    assert_nothing_stored(settings)


def test_oversized_uploads(settings, teams: dict, model_bytes: bytes) -> None:  # type: ignore[no-untyped-def]
    small = settings.model_copy(update={"max_model_bytes": 1024 * 1024})
    with LiveServer(small) as server:
        response = upload(server.url, teams["alpha"], model=model_bytes[: 3 * 1024 * 1024])
        assert response.status_code == 413
        assert "exceeds the limit" in response.json()["detail"]
        response = upload(
            server.url,
            teams["alpha"],
            model=model_bytes[:1000],
            log=fedavg_log() + "0,-1,0,5\n" * 20_000,
        )
        assert response.status_code == 413
        assert "communication_log exceeds the limit of 65536 bytes" in response.json()["detail"]
    assert_nothing_stored(settings)


def test_oversized_personalisations(settings, teams: dict, model_bytes: bytes) -> None:  # type: ignore[no-untyped-def]
    small = settings.model_copy(
        update={"max_personal_file_bytes": 4096, "max_personal_bytes": 10_000}
    )
    big = {3: b"\0" * 5000}
    total = {k: b"\0" * 4000 for k in range(3)}
    with LiveServer(small) as server:
        for files, words in ((big, "personal_3 exceeds the limit of 4096 bytes"),
                             (total, "personal_2: the personalisations exceed the limit of "
                                     "10000 bytes in all")):  # fmt: skip
            response = upload(server.url, teams["alpha"], model=model_bytes, meta=metadata(3),
                              extra=personal_parts(files, clients=10))  # fmt: skip
            assert response.status_code == 413, response.text
            assert words in response.json()["detail"]
    assert_nothing_stored(settings)


def test_personalisations_are_refused_at_their_header_unless_the_metadata_names_track_3(
    settings, teams: dict, model_bytes: bytes
) -> None:  # type: ignore[no-untyped-def]
    """A track-1 upload's personal part is refused before its bytes are read (here it is over
    the personalisation limit: read, it would be a 413), and one sent before the metadata is
    refused with the order to send."""
    small = settings.model_copy(update={"max_personal_file_bytes": 4096,
                                        "max_personal_bytes": 10_000})
    oversized = personal_parts({0: b"\0" * 20_000}, clients=10)
    with LiveServer(small) as server:
        response = upload(server.url, teams["alpha"], model=model_bytes, meta=metadata(1),
                          extra=oversized)
        assert response.status_code == 422, response.text
        assert response.json()["detail"] == (
            "personal_0: track 1 submissions carry no personalisations; send the fields "
            "personal_{k} with a track-3 submission only")
        first = {"personal_0": ("client_0.safetensors", b"\0" * 10, "application/octet-stream"),
                 "model": ("model.safetensors", model_bytes, "application/octet-stream"),
                 "metadata": ("submission.json", json.dumps(metadata(3)), "application/json")}
        response = httpx.post(f"{server.url}/api/v1/submissions", files=first,
                              headers={"Authorization": f"Bearer {teams['alpha']}"})
        assert response.status_code == 422, response.text
        assert response.json()["detail"].startswith(
            "personal_0 came before the metadata part; send metadata (submission.json) first")
    assert_nothing_stored(settings)


def test_track3_upload_is_stored_with_one_file_per_client(
    live_server: LiveServer, teams: dict, model_bytes: bytes, settings, tiny_reference: Path
) -> None:  # type: ignore[no-untyped-def]
    from safetensors.numpy import load_file, save

    tensors = load_file(str(tiny_reference / "model.safetensors"))
    name = sorted(tensors)[0]
    three = save({name: tensors[name]})
    response = upload(live_server.url, teams["alpha"], model=model_bytes, meta=metadata(3),
                      extra=personal_parts({3: three}, clients=10))  # fmt: skip
    assert response.status_code == 202, response.text
    stored = Path(settings.storage_dir) / "submissions" / response.json()["id"] / "personal"
    assert sorted(p.name for p in stored.iterdir()) == sorted(
        f"client_{k}.safetensors" for k in range(10)
    )
    assert (stored / "client_3.safetensors").read_bytes() == three
    assert (stored / "client_0.safetensors").read_bytes() == b""
    assert list((Path(settings.storage_dir) / "incoming").iterdir()) == []


def test_organiser_rescore(live_server: LiveServer, teams: dict, tmp_path: Path, settings) -> None:  # type: ignore[no-untyped-def]
    from evaluator import crud
    from evaluator.tables import Status
    from tests.evaluator.factories import small_safetensors

    model = small_safetensors(tmp_path / "m.safetensors").read_bytes()
    submission_id = upload(live_server.url, teams["alpha"], model=model).json()["id"]
    url = f"{live_server.url}/api/v1/submissions/{submission_id}/rescore"
    organiser = {"Authorization": f"Bearer {teams['org']}"}
    assert httpx.post(url, headers=organiser).status_code == 409
    with session_scope(settings.db_url) as session:
        crud.transition(
            session,
            submission_id=submission_id,
            from_status=Status.QUEUED,
            to_status=Status.REJECTED,
            detail="test",
        )
    assert httpx.post(url, headers={"Authorization": f"Bearer {teams['alpha']}"}).status_code == 403
    response = httpx.post(url, headers=organiser)
    assert response.status_code == 202
    body = response.json()
    assert body["status"] == "queued" and body["reason"] is None
    assert body["transitions"][-1] == {
        **body["transitions"][-1],
        "from_status": "rejected",
        "to_status": "queued",
        "detail": "re-score requested by org",
    }


def test_malformed_multipart_body(live_server: LiveServer, teams: dict, settings) -> None:  # type: ignore[no-untyped-def]
    headers = {
        "Authorization": f"Bearer {teams['alpha']}",
        "Content-Type": "multipart/form-data; boundary=XYZ",
    }
    body = b'--XYZ\r\nContent-Disposition: form-data; name="model"\r\n\r\nabc\r\n--XYZ--garbage'
    response = httpx.post(
        f"{live_server.url}/api/v1/submissions", headers=headers, content=b"no boundary here at all"
    )
    assert response.status_code in (400, 422)
    response = httpx.post(f"{live_server.url}/api/v1/submissions", headers=headers, content=body)
    assert response.status_code in (400, 422)
    assert_nothing_stored(settings)


# A valid metadata part (it is parsed as soon as it ends), then the framing error.
_PART = (b'--XYZ\r\nContent-Disposition: form-data; name="metadata"\r\n\r\n'
         b'{"track": 1, "method": "fedavg"}\r\n')


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize(
    ("boundary", "body", "words"),
    [
        ("B" * 300, b"--" + b"B" * 300 + b"--\r\n", "RFC 2046 allows at most 70"),
        (
            "XYZ",
            b'--XYZ\r\nContent-Disposition: form-data; name="model"\r\n'
            b'Content-Disposition: form-data; name="privacy"\r\n\r\nabc\r\n--XYZ--\r\n',
            "twice",
        ),
        (
            "XYZ",
            b'--XYZ\r\nContent-Disposition: form-data; name="model"; name="privacy"\r\n'
            b"\r\nabc\r\n--XYZ--\r\n",
            "names its field twice",
        ),
        ("XYZ", _PART + b'--XYZ\r\nContent-Disposition: form-data; name="model"\r\n\r\nab',
         "closing boundary"),
    ],
    ids=["boundary of 300 characters", "header twice", "name twice", "no closing boundary"],
)
def test_malformed_multipart_framing_is_a_400(
    live_server: LiveServer, teams: dict, settings, boundary: str, body: bytes, words: str
) -> None:  # type: ignore[no-untyped-def]
    headers = {
        "Authorization": f"Bearer {teams['alpha']}",
        "Content-Type": f"multipart/form-data; boundary={boundary}",
    }
    response = httpx.post(f"{live_server.url}/api/v1/submissions", headers=headers, content=body)
    assert response.status_code == 400, response.text
    assert words in response.json()["detail"]
    assert_nothing_stored(settings)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/api/v1/submissions", {"offset": str(2 * 10**19)}),
        ("/api/v1/submissions", {"offset": "9223372036854775808"}),
        ("/api/v1/submissions", {"limit": str(10**30)}),
        ("/api/v1/submissions", {"offset": "-1"}),
    ],
)
def test_numeric_query_parameters_are_bounded(
    live_server: LiveServer, teams: dict, path: str, params: dict
) -> None:
    for token in (teams["alpha"], teams["org"]):
        response = httpx.get(
            live_server.url + path,
            params={**params, "all_teams": "true"},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert response.status_code == 422, response.text
    largest = httpx.get(
        live_server.url + path,
        params={"offset": "1000000"},
        headers={"Authorization": f"Bearer {teams['alpha']}"},
    )
    assert largest.status_code == 200 and largest.json()["submissions"] == []


def test_track3_logs_of_the_two_baselines_are_accepted(
    live_server: LiveServer, teams: dict, model_bytes: bytes, tiny_reference: Path
) -> None:  # type: ignore[no-untyped-def]
    """fedavg-ft: FedAvg rounds then the final model sent to every client (personal.log_round);
    local-only: nothing sent, an empty log and 0 rounds. Track 1 still needs messages."""
    from safetensors.numpy import load_file, save

    from tests.evaluator.test_validation_commlog import _fedavg_ft_log

    tensors = load_file(str(tiny_reference / "model.safetensors"))
    name = sorted(tensors)[0]
    empty = personal_parts({}, clients=10)
    one = personal_parts({0: save({name: tensors[name]})}, clients=10)  # not a copy of `empty`
    fedavg_ft = metadata(3, rounds=2, personal={"log_round": 3})
    local_only = metadata(3, rounds=0, clients_per_round=2, personal={"log_round": None})
    for log, meta, token, parts in ((_fedavg_ft_log(), fedavg_ft, "alpha", empty),
                                    (LOG_HEADER + "\n", local_only, "beta", one)):  # fmt: skip
        response = upload(live_server.url, teams[token], model=model_bytes, log=log, meta=meta,
                          extra=parts)  # fmt: skip
        assert response.status_code == 202, response.text
    refused = upload(live_server.url, teams["org"], model=model_bytes, log=LOG_HEADER + "\n",
                     meta=metadata(1, rounds=0))  # fmt: skip
    assert refused.status_code == 422 and "header but no messages" in refused.json()["detail"]
    wrong = upload(live_server.url, teams["org"], model=model_bytes, log=_fedavg_ft_log(),
                   meta=metadata(3, rounds=2), extra=empty)  # fmt: skip
    assert wrong.status_code == 422 and "holds 3 rounds" in wrong.json()["detail"]
