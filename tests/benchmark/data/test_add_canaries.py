"""`pflkit data add-canaries`: canaries added to an existing benchmark in the real layout look
like its providers (fields, ids, counts, page sizes and names, question numbering), the coins
stay under evaluator/, SRC is left as it was, and a flat real-release layout with other ids is
followed too."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from benchmark.data import load_split
from benchmark.data.add_canaries import add_canaries, document_of
from benchmark.data.cli import data
from benchmark.data.errors import DataError
from benchmark.data.imdb import read_data_points, read_imdb, write_data_points, write_imdb
from benchmark.data.synthetic import generate_benchmark
from benchmark.data.synthetic.canaries import COINS_FILE, PROBES_FILE, CanarySpec

CANARIES = 12


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("host") / "bench"
    generate_benchmark(out, "tiny", 3, workers=1, progress=False, public_documents=0)
    return out


def _digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file():
            digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


def _clients(root: Path) -> list[list[dict]]:
    return [read_imdb(root / f"imdb_train_client_{k}.npy")[1] for k in range(10)]


@pytest.fixture(scope="module")
def copied(host: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    before = _digest(host)
    out = tmp_path_factory.mktemp("copy") / "bench"
    result = CliRunner().invoke(
        data, ["add-canaries", str(host), "--out", str(out), "--canaries", str(CANARIES)]
    )
    assert result.exit_code == 0, result.output
    assert _digest(host) == before, "add-canaries changed its source"
    return out


def test_canaries_join_the_clients_like_providers(host: Path, copied: Path) -> None:
    coins = json.loads((copied / "evaluator" / COINS_FILE).read_text())
    assert coins["kind"] == "membership" and len(coins["canaries"]) == CANARIES
    included = [c for c in coins["canaries"] if c["included"]]
    held_out = [c for c in coins["canaries"] if not c["included"]]
    assert included and held_out
    participant = copied / "participant"
    assert not list(participant.rglob(COINS_FILE)) and not list(participant.rglob(PROBES_FILE))
    points = read_data_points(participant / "data_points.json")
    old_points = read_data_points(host / "participant" / "data_points.json")
    ids = sorted(p for client in points.values() for p in client)
    # renumbered densely, as the generator numbers: nothing marks where canaries were added
    assert ids == [f"p{i:05d}" for i in range(len(ids))]
    assert len(ids) == sum(map(len, old_points.values())) + len(included)
    clients = _clients(participant)
    host_clients = _clients(host / "participant")
    for canary in included:
        indexes = points[f"client_{canary['client']}"][canary["provider"]]
        records = [clients[canary["client"]][i - 1] for i in indexes]
        assert {document_of(r) for r in records} == set(canary["documents"])
        assert {r["provider"] for r in records} == {canary["provider"]}
        # a block somewhere among the client's records, not always at its end
        host_counts = [
            len({document_of(host_clients[canary["client"]][i - 1]) for i in ix})
            for ix in old_points[f"client_{canary['client']}"].values()
        ]
        assert len(canary["documents"]) in host_counts
    assert any(
        max(points[f"client_{c['client']}"][c["provider"]]) < len(clients[c["client"]])
        for c in included
    )
    text = json.dumps([r for client in clients for r in client], default=str)
    assert "canar" not in text.lower()
    for canary in held_out:
        assert all(d not in text for d in canary["documents"])
    # every record carries the host's fields, no more, no fewer
    host_fields = {frozenset(r) for client in host_clients for r in client}
    assert {frozenset(r) for client in clients for r in client} == host_fields
    # question ids: the training files numbered densely in file order, the other files moved up
    train_ids = [r["question_id"] for client in clients for r in client]
    assert train_ids == list(range(train_ids[0], train_ids[0] + len(train_ids)))
    val_ids = [r["question_id"] for r in read_imdb(participant / "imdb_val.npy")[1]]
    assert min(val_ids) == max(train_ids) + 1
    # every page of a canary exists at the size of some host page
    host_sizes = {Image.open(p).size for p in (host / "participant" / "images").glob("*.jpg")}
    for canary in included:
        for page in (participant / "images").glob(f"{canary['documents'][0]}_p*.jpg"):
            assert Image.open(page).size in host_sizes
    # the kit reads the copy
    assert len(load_split(copied, "train", client=included[0]["client"])) == len(
        clients[included[0]["client"]]
    )


def test_the_audit_reads_the_copy(copied: Path) -> None:
    from evaluator.canary_audit import CanaryAudit

    # both kinds of probe are there: each attack scores its own
    for attack, kind in (("calibrated", "question"), ("secret", "secret")):
        auditor = CanaryAudit(copied, Path("unused"), attack=attack, probe_documents=None)
        providers, coins, probes = auditor._canaries
        assert len(providers) == CANARIES and any(coins) and not all(coins)
        assert {p["probe"] for p in probes} == {kind}


def test_a_flat_release_with_hexadecimal_ids(host: Path, tmp_path: Path) -> None:
    """The real release's layout: the imdb files and data_points.json at the top, images/
    beside them, provider ids that are not numbered, records without the generator's extra
    fields, page names '<document>_<page>' from 0."""
    flat = tmp_path / "flat"
    (flat / "images").mkdir(parents=True)
    rng = np.random.default_rng(0)
    points = read_data_points(host / "participant" / "data_points.json")
    renamed = {p: "".join(rng.choice(list("0123456789abcdef"), 16)) for c in points.values()
               for p in c}  # fmt: skip
    for k in range(10):
        header, records = read_imdb(host / "participant" / f"imdb_train_client_{k}.npy")
        shown = []
        for r in records:
            page = int(r["image_name"].rsplit("_p", 1)[1]) - 1
            name = f"{r['document_id']}_{page}"
            source = host / "participant" / "images" / f"{r['image_name']}.jpg"
            shutil.copy(source, flat / "images" / f"{name}.jpg")
            shown.append({"question_id": r["question_id"] * 3, "question": r["question"],
                          "answers": r["answers"], "ocr_tokens": r["ocr_tokens"],
                          "ocr_normalized_boxes": r["ocr_normalized_boxes"], "image_name": name,
                          "set_name": "train"})  # fmt: skip
        write_imdb(flat / f"imdb_train_client_{k}.npy", header, shown)
    write_data_points(flat / "data_points.json", {c: {renamed[p]: ix for p, ix in providers.items()}
                                                  for c, providers in points.items()})  # fmt: skip
    out = tmp_path / "out"
    summary = add_canaries(flat, out, CanarySpec(6, "reconstruction", 4), seed=1, progress=False)
    assert summary["included"] == 6 and summary["records_added"] > 0
    new_points = read_data_points(out / "data_points.json")
    added = {p for c in new_points.values() for p in c} - set(renamed.values())
    assert len(added) == 6 and all(len(p) == 16 and int(p, 16) >= 0 for p in added)
    fields = {
        frozenset(r) for k in range(10) for r in read_imdb(out / f"imdb_train_client_{k}.npy")[1]
    }
    assert fields == {frozenset({"question_id", "question", "answers", "ocr_tokens",
                                 "ocr_normalized_boxes", "image_name", "set_name"})}  # fmt: skip
    ids = [r["question_id"] for k in range(10)
           for r in read_imdb(out / f"imdb_train_client_{k}.npy")[1]]  # fmt: skip
    assert len(ids) == len(set(ids))
    coins = json.loads((out / "evaluator" / COINS_FILE).read_text())
    for canary in coins["canaries"]:
        assert len(canary["candidates"]) == 4
        for document in canary["documents"]:
            assert (out / "images" / f"{document}_0.jpg").is_file()


def test_bad_sources_and_targets_are_refused(host: Path, copied: Path, tmp_path: Path) -> None:
    with pytest.raises(DataError, match="already has canaries"):
        add_canaries(copied, tmp_path / "again", CanarySpec(2), progress=False)
    with pytest.raises(DataError, match="holds no imdb_train_client_0.npy"):
        add_canaries(tmp_path, tmp_path / "x", CanarySpec(2), progress=False)
    with pytest.raises(DataError, match="exists and is not empty"):
        add_canaries(host, copied, CanarySpec(2), progress=False)
    assert not list(tmp_path.glob(".*partial*"))
