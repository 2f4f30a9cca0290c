"""Canary providers of the privacy audit: the coins and held-out canaries stay under
evaluator/, the included canaries look like ordinary providers, and the probes hide the secret."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmark.data.imdb import read_data_points, read_imdb
from benchmark.data.synthetic import generate_benchmark
from benchmark.data.synthetic.canaries import COINS_FILE, PROBES_FILE

CANARIES = 16


@pytest.fixture(scope="module")
def canary_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("canaries") / "bench"
    generate_benchmark(out, "tiny", 0, workers=1, progress=False, public_documents=0,
                       canaries=CANARIES, canary_documents=2)  # fmt: skip
    return out


def _participant_text(root: Path) -> str:
    """Every string a participant can read: file names, JSON, and every record's values."""
    parts = []
    for path in sorted((root / "participant").rglob("*")):
        parts.append(path.name)
        if path.suffix == ".json":
            parts.append(path.read_text())
        elif path.suffix == ".npy":
            header, records = read_imdb(path)
            parts.append(json.dumps(header, default=str))
            parts += [json.dumps(r, default=str) for r in records]
            parts += [" ".join(r["ocr_tokens"]) for r in records]
    return "\n".join(parts)


def _coins(root: Path) -> list[dict]:
    return json.loads((root / "evaluator" / COINS_FILE).read_text())["canaries"]


def test_the_coins_never_reach_the_participant_directory(canary_dir: Path) -> None:
    coins = _coins(canary_dir)
    assert len(coins) == CANARIES
    included = [c for c in coins if c["included"]]
    held_out = [c for c in coins if not c["included"]]
    assert included and held_out  # seed 0 flips both ways
    text = _participant_text(canary_dir)
    assert "canar" not in text.lower()
    assert not list((canary_dir / "participant").rglob(COINS_FILE))
    assert not list((canary_dir / "participant").rglob(PROBES_FILE))
    _, probes = read_imdb(canary_dir / "evaluator" / PROBES_FILE)
    secrets = {c["provider"]: {p["answers"] for p in probes
                               if p["provider"] == c["provider"] and p["probe"] == "secret"}
               for c in coins}  # fmt: skip
    for canary in held_out:
        assert f'"{canary["provider"]}"' not in text
        for document in canary["documents"]:
            assert document not in text
        for secret in secrets[canary["provider"]]:
            assert secret not in text, "a held-out canary's identity is in the participant data"
    # the included canaries are in their client's training data, like any provider
    data_points = read_data_points(canary_dir / "participant" / "data_points.json")
    for canary in included:
        assert canary["provider"] in data_points[f"client_{canary['client']}"]
        for secret in secrets[canary["provider"]]:
            assert secret in text


def test_included_canaries_are_numbered_among_their_clients_providers(canary_dir: Path) -> None:
    coins = _coins(canary_dir)
    data_points = read_data_points(canary_dir / "participant" / "data_points.json")
    ids = sorted(p for client in data_points.values() for p in client)
    # the training providers are p00000.. without gaps: nothing marks where canaries were
    assert ids == [f"p{i:05d}" for i in range(len(ids))]
    in_ids = {c["provider"] for c in coins if c["included"]}
    assert in_ids < set(ids)
    # every held-out canary's id comes after every id a participant can see
    val = read_imdb(canary_dir / "participant" / "imdb_val.npy")[1]
    visible = set(ids) | {r["provider"] for r in val}
    assert min(c["provider"] for c in coins if not c["included"]) > max(visible)
    # in-canaries sit among their client's ordinary providers, not all at its end
    assert any(
        any(p > c["provider"] for p in data_points[f"client_{c['client']}"] if p not in in_ids)
        for c in coins if c["included"]
    )  # fmt: skip


def test_ordinary_providers_keep_their_identities_and_clients() -> None:
    from dataclasses import replace

    from benchmark.data.synthetic.benchmark import SAME_LOCALE_PROBABILITY, plan_providers
    from benchmark.data.synthetic.canaries import CanarySpec, plan_canaries
    from benchmark.data.synthetic.scales import SCALES

    providers = plan_providers(SCALES["tiny"], 0)
    plan = plan_canaries(providers, CanarySpec(CANARIES), 10, 0, SAME_LOCALE_PROBABILITY)
    canaries = set(plan.canary_ids)
    ordinary = [p for i, p in enumerate(plan.providers) if i not in canaries]

    def key(p):  # everything but the id, which is renumbered
        return (replace(p.company, provider_id=""), p.template, p.client, p.out_split)

    assert sorted(map(key, ordinary), key=repr) == sorted(map(key, providers), key=repr)
    names = [plan.providers[i].company.name for i in plan.canary_ids]
    assert len(set(names) | {p.company.name for p in providers}) == len(providers) + CANARIES
    assert [plan.providers[i].client >= 0 for i in plan.canary_ids] == plan.included


def test_probes_ask_for_the_secret_without_showing_it(canary_dir: Path) -> None:
    coins = _coins(canary_dir)
    _, probes = read_imdb(canary_dir / "evaluator" / PROBES_FILE)
    questions = [p for p in probes if p["probe"] == "question"]
    probes = [p for p in probes if p["probe"] == "secret"]
    assert {p["provider"] for p in probes} == {c["provider"] for c in coins}
    assert {p["question_type"] for p in probes} == {
        "provider_name", "provider_vat_id", "provider_iban"
    }  # fmt: skip
    for probe in probes:
        words = " ".join(probe["ocr_tokens"]).lower()
        assert probe["answers"].lower() not in words
        assert probe["answers"].split()[0].lower() not in words
        assert len(probe["ocr_tokens"]) == len(probe["ocr_normalized_boxes"]) > 10
        assert (canary_dir / "evaluator" / "images" / f"{probe['image_name']}.jpg").is_file()
    # every canary's invoices are the ones planned: an included canary's are in training
    train_documents = {
        r["document_id"]
        for k in range(10)
        for r in read_imdb(canary_dir / "participant" / f"imdb_train_client_{k}.npy")[1]
    }
    for canary in coins:
        assert len(canary["documents"]) == 2
        assert all((d in train_documents) == canary["included"] for d in canary["documents"])
    # the "question" probes of an included canary are its training records, exactly
    training = {}
    for k in range(10):
        for r in read_imdb(canary_dir / "participant" / f"imdb_train_client_{k}.npy")[1]:
            training[(r["document_id"], r["question"])] = r
    compared = 0
    for probe in questions:
        record = training.get((probe["document_id"], probe["question"]))
        if record is not None:
            for field in ("answers", "ocr_tokens", "image_name", "provider", "question_type"):
                assert probe[field] == record[field]
            assert (probe["ocr_normalized_boxes"] == record["ocr_normalized_boxes"]).all()
            compared += 1
    in_documents = {d for c in coins if c["included"] for d in c["documents"]}
    assert compared == sum(p["document_id"] in in_documents for p in questions) > 0


def test_benchmark_json_says_how_many_not_which(canary_dir: Path) -> None:
    info = json.loads((canary_dir / "benchmark.json").read_text())
    assert info["canaries"] == {"count": CANARIES, "documents_each": 2}
    assert "track1_threshold" not in info  # measured without canaries
    text = json.dumps(info)
    assert all(c["provider"] not in text for c in _coins(canary_dir))


@pytest.fixture(scope="module")
def reconstruction_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("reconstruction") / "bench"
    generate_benchmark(out, "tiny", 0, workers=1, progress=False, public_documents=0,
                       canaries=CANARIES, canary_kind="reconstruction", canary_candidates=5)  # fmt: skip
    return out


def test_reconstruction_canaries_train_on_one_of_k_secrets(reconstruction_dir: Path) -> None:
    """Every reconstruction canary is in training with the candidate its secret names; the other
    candidates appear nowhere a participant can read; the probes ask for the secret without
    showing it; invoice counts are drawn like the ordinary providers' (not one fixed D)."""
    coins_file = json.loads((reconstruction_dir / "evaluator" / COINS_FILE).read_text())
    assert coins_file["kind"] == "reconstruction"
    coins = coins_file["canaries"]
    assert all(c["included"] for c in coins) and len(coins) == CANARIES
    text = _participant_text(reconstruction_dir)
    assert "canar" not in text.lower()
    for canary in coins:
        options = canary["candidates"]
        assert len(options) == 5 and 0 <= canary["secret"] < 5
        for index, option in enumerate(options):
            for value in option.values():
                assert (value in text) == (index == canary["secret"]), (canary["provider"], value)
    _, probes = read_imdb(reconstruction_dir / "evaluator" / PROBES_FILE)
    asked = {(p["provider"], p["question_type"]) for p in probes if p["probe"] == "secret"}
    for canary in coins:
        assert (canary["provider"], "provider_iban") in asked
        secret = canary["candidates"][canary["secret"]]
        for probe in (p for p in probes if p["provider"] == canary["provider"]
                      and p["probe"] == "secret" and p["question_type"] in secret):  # fmt: skip
            assert probe["answers"] == secret[probe["question_type"]]
            groups = [g for value in secret.values() for g in value.split() if len(g) >= 2]
            assert not set(groups) & set(probe["ocr_tokens"])
    counts = [len(c["documents"]) for c in coins]
    assert len(set(counts)) > 1, counts
    info = json.loads((reconstruction_dir / "benchmark.json").read_text())["canaries"]
    assert info == {"count": CANARIES, "documents_each": "drawn", "kind": "reconstruction",
                    "candidates": 5}  # fmt: skip


def test_bad_canary_options_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="canary kind must be one of membership, reconstruction"):
        generate_benchmark(tmp_path / "a", "tiny", canaries=2, canary_kind="guess", progress=False)
    with pytest.raises(ValueError, match="at least 2 candidates"):
        generate_benchmark(tmp_path / "b", "tiny", canaries=2, canary_kind="reconstruction",
                           canary_candidates=1, progress=False)  # fmt: skip
    assert not list(tmp_path.iterdir())
