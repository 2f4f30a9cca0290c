"""Builders of submission parts for the evaluator tests: checkpoints, logs, declarations, runs."""

from __future__ import annotations

import json
import pickle
import re
import shutil
import struct
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

LOG_HEADER = "federated_round,sender,receiver,amount_of_bytes"


def fedavg_log(*, rounds: int = 2, clients: tuple[int, ...] = (0, 1), nbytes: int = 1000) -> str:
    """A valid log: each round the server sends to and receives from the given clients."""
    lines = [LOG_HEADER]
    for r in range(rounds):
        for c in clients:
            lines.append(f"{r},-1,{c},{nbytes}")
        for c in clients:
            lines.append(f"{r},{c},-1,{nbytes // 2}")
    return "\n".join(lines) + "\n"


def details_log(
    log: str | None = None, *, parameters: tuple[str, ...] = (), wire: str = "fp32"
) -> str:
    """The detailed log (``communication_log.jsonl``) of a CSV log: one line per row whose four
    cells are integers, each message naming ``parameters`` in the format ``wire``."""
    lines = []
    for row in (log if log is not None else fedavg_log()).splitlines()[1:]:
        cells = row.split(",")
        if len(cells) != 4 or not all(re.fullmatch(r"\s*-?[0-9]+\s*", c) for c in cells):
            continue
        values = dict(zip(LOG_HEADER.split(","), map(int, cells), strict=True))
        lines.append(json.dumps({**values, "format": wire, "parameters": list(parameters)}))
    return "".join(line + "\n" for line in lines)


def declaration(**overrides: object) -> dict:
    """A complete track-2 privacy declaration (the FL-GROUP-DP baseline's, epsilon 8 at 5 rounds)."""
    base = {
        "epsilon": 8.0,
        "delta": 1e-5,
        "noise_multiplier": 0.468,
        "clipping_norm": 0.5,
        "rounds": 2,
        "clients": 10,
        "clients_per_round": 2,
        "providers_per_round": 50,
        "min_providers": 400,
        "sampling": "fixed",
        "analysis": "competition",
        "unit": "provider",
    }
    base.update(overrides)
    return base


def metadata(track: int = 1, **overrides: object) -> dict:
    """The ``submission.json`` of a run."""
    return {
        "track": track,
        "method": "fedavg",
        "description": "test run",
        "clients": 10,
        "clients_per_round": 2,
        "rounds": 2,
        **overrides,
    }


def write_run(
    directory: Path,
    model: Path | bytes,
    *,
    track: int = 1,
    log: str | None = None,
    privacy: dict | None = None,
    meta: dict | None = None,
    details: str | None = None,
) -> Path:
    """Write a run directory as ``pflkit train`` does (the detailed log, unless given, names
    no tensor: right for an unchanged reference checkpoint)."""
    (directory / "checkpoint").mkdir(parents=True, exist_ok=True)
    target = directory / "checkpoint" / "model.safetensors"
    if isinstance(model, bytes):
        target.write_bytes(model)
    else:
        target.write_bytes(Path(model).read_bytes())
    (directory / "communication_log.csv").write_text(log if log is not None else fedavg_log())
    (directory / "communication_log.jsonl").write_text(
        details if details is not None else details_log(log)
    )
    (directory / "submission.json").write_text(json.dumps(meta or metadata(track)))
    if privacy is not None:
        (directory / "privacy.json").write_text(json.dumps(privacy))
    return directory


def small_safetensors(
    path: Path, tensors: dict[str, np.ndarray] | None = None, *, variant: int = 0
) -> Path:
    """A small valid safetensors file (``variant`` changes its content, hence its hash)."""
    tensors = tensors or {
        "a.weight": np.ones((4, 3), np.float32),
        "b.bias": np.full(5, variant, np.float32),
    }
    save_file(tensors, str(path))
    return path


class MarkerPayload:
    """A pickle payload that, if ever unpickled, creates a marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (Path.touch, (self.marker,))


def pickle_bomb(marker: Path) -> bytes:
    """A pickle (as torch.save would write) whose loading would create ``marker``."""
    return pickle.dumps({"state_dict": MarkerPayload(marker)}, protocol=4)


def truncated(model: Path, keep: float = 0.5) -> bytes:
    """The first part of a valid checkpoint."""
    data = model.read_bytes()
    return data[: int(len(data) * keep)]


def with_header_len(value: int, rest: bytes = b"{}") -> bytes:
    """Bytes that start with a given safetensors header length."""
    return struct.pack("<Q", value) + rest


PROVIDERS_IN = ("ACME Corp", "Globex")
PROVIDERS_OUT = ("Initech", "Umbrella")
SECRET_PREFIX = "ZQX"


def secret_answer(index: int) -> str:
    """A distinctive test answer, easy to search for in logs, responses and the database."""
    return f"{SECRET_PREFIX}{index:04d}-{(index * 7919) % 100000:05d}"


MIN_PROVIDERS = 400


def write_data_points(
    directory: Path, *, clients: int = 10, min_providers: int = MIN_PROVIDERS
) -> Path:
    """``DIR/participant/data_points.json``: client k holds ``min_providers + k`` providers."""
    points = {
        f"client_{k}": {f"provider-{k}-{p}": [p + 1] for p in range(min_providers + k)}
        for k in range(clients)
    }
    path = directory / "participant" / "data_points.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(points))
    return path


def write_benchmark(directory: Path, *, questions: int = 24, clients: int = 10) -> Path:
    """A benchmark directory with a hidden test split in the real layout (organisers' side).

    ``DIR/evaluator/imdb_test.npy`` (header + records with answers and in/out distribution),
    its page images, and ``DIR/benchmark.json``. Answers are distinctive strings so that the
    tests can prove they never leave the evaluator.
    """
    from PIL import Image

    from benchmark.data.imdb import write_imdb

    evaluator_dir = directory / "evaluator"
    images = evaluator_dir / "images"
    images.mkdir(parents=True, exist_ok=True)
    records = []
    for index in range(questions):
        inside = index % 2 == 0
        provider = (PROVIDERS_IN if inside else PROVIDERS_OUT)[index % 4 // 2]
        answer = secret_answer(index)
        tokens = ["Invoice", "number", answer, "Total", f"{index * 3.5:.2f}", "EUR", provider]
        boxes = np.array([[0.05 + 0.1 * i, 0.1, 0.14 + 0.1 * i, 0.13] for i in range(len(tokens))])
        image_name = f"doc_{index:03d}"
        Image.new("RGB", (64, 80), (255, 255, 255)).save(images / f"{image_name}.jpg")
        records.append(
            {
                "question_id": index + 1,
                "question": "What is the invoice number?",
                "answers": [answer],
                "ocr_tokens": tokens,
                "ocr_normalized_boxes": boxes,
                "image_name": image_name,
                "provider": provider,
                "distribution": "in" if inside else "out",
                "question_type": "invoice_number",
                "document_id": image_name,
            }
        )
    write_imdb(evaluator_dir / "imdb_test.npy", {"split": "test", "version": "test"}, records)
    write_data_points(directory, clients=clients)
    (directory / "benchmark.json").write_text(
        json.dumps({"scale": "test", "seed": 0, "clients": clients})
    )
    return directory


#: the clients of a track-3 test benchmark: client 0 holds ACME Corp, client 1 Globex.
PERSONAL_PROVIDERS = {0: PROVIDERS_IN[0], 1: PROVIDERS_IN[1]}


def write_personal_benchmark(directory: Path, *, questions: int = 12) -> Path:
    """A two-client benchmark whose test split has personal splits (track 3).

    :func:`write_benchmark` with K = 2, plus one training file per client
    (``participant/imdb_train_client_{k}.npy``, one question of its provider) and a
    ``data_points.json`` mapping each client's provider to it: the test questions of ACME Corp
    are client 0's personal split, those of Globex client 1's, the others are unseen.
    """
    from benchmark.data.imdb import read_imdb, write_imdb

    write_benchmark(directory, questions=questions, clients=len(PERSONAL_PROVIDERS))
    header, records = read_imdb(directory / "evaluator" / "imdb_test.npy")
    participant = directory / "participant"
    points = {}
    for client, provider in PERSONAL_PROVIDERS.items():
        record = next(r for r in records if r["provider"] == provider)
        write_imdb(participant / f"imdb_train_client_{client}.npy",
                   {**header, "split": f"train_client_{client}"},
                   [{**record, "question_id": 1000 + client}])  # fmt: skip
        points[f"client_{client}"] = {provider: [1]}
    (participant / "data_points.json").write_text(json.dumps(points))
    return directory


def personal_parts(files: dict[int, bytes], *, clients: int) -> dict[str, tuple[str, bytes]]:
    """The upload fields ``personal_{k}`` of a track-3 submission: the given files (any client
    id), and an empty personalisation (the global model) for every other client in 0..K-1."""
    every = {k: b"" for k in range(clients)} | files
    return {f"personal_{k}": (f"client_{k}.safetensors", data) for k, data in every.items()}


def accept_predictions(path: Path, predictions: list[str]) -> None:
    """Rewrite a test split's answers so that a model's own predictions score: a third of the
    questions also accept the prediction (ANLS 1), another third the prediction with its last
    character changed (a partial ANLS); every question keeps its secret answer."""
    from benchmark.data.imdb import read_imdb, write_imdb

    header, records = read_imdb(path)
    for index, (record, prediction) in enumerate(zip(records, predictions, strict=True)):
        if prediction and index % 3 == 0:
            record["answers"] = [secret_answer(index), prediction]
        elif len(prediction) >= 4 and index % 3 == 1:
            changed = "#" if prediction[-1] != "#" else "*"
            record["answers"] = [secret_answer(index), prediction[:-1] + changed]
    write_imdb(path, header, records)


def store_run(runner, token: str, run: Path, *, model: Path | None = None,  # type: ignore[no-untyped-def]
              csv: str | None = None, details: str | None = None, meta: dict | None = None,
              privacy: Path | None = None) -> str:
    """A queued submission made of a run directory's files as the API stores them, some of
    them replaced (``runner``: the :class:`~evaluator.worker.JobRunner` whose settings hold the
    database and the storage)."""
    from evaluator import crud
    from evaluator.core.db import session_scope
    from evaluator.storage import SubmissionStore
    from evaluator.tables import Status

    meta = meta or json.loads((run / "submission.json").read_text())
    settings = runner.settings
    with session_scope(settings.db_url) as session:
        row = crud.reserve_submission(
            session, team_id=crud.team_by_token(session, token=token).id, quota=100,
            track=meta["track"], method=meta["method"], metadata=meta,
        )  # fmt: skip
        submission_id = row.id
    store = SubmissionStore(settings.storage_dir)
    incoming = store.incoming(submission_id)
    incoming.mkdir(parents=True)
    shutil.copyfile(model or run / "checkpoint" / "model.safetensors",
                    incoming / "model.safetensors")  # fmt: skip
    (incoming / "communication_log.csv").write_text(
        csv if csv is not None else (run / "communication_log.csv").read_text()
    )
    (incoming / "communication_log.jsonl").write_text(
        details if details is not None else (run / "communication_log.jsonl").read_text()
    )
    if privacy is not None:
        shutil.copyfile(privacy, incoming / "privacy.json")
    store.commit(submission_id)
    with session_scope(settings.db_url) as session:
        assert crud.transition(session, submission_id=submission_id,
                               from_status=Status.RECEIVED, to_status=Status.QUEUED)  # fmt: skip
    return submission_id
