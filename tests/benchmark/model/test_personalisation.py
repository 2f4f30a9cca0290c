"""Track-3 personalisation files: written atomically, read with limits, bad ones refused."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from benchmark.model import (
    PersonalisationError,
    disk_state_dict,
    expected_tensor_spec,
    load_model,
    personalised,
    read_personalisations,
    write_personalisations,
)
from benchmark.model.personalisation import personalisation_delta

K = 4
EMBEDDING = "language_backbone.shared.weight"


@pytest.fixture(scope="module")
def model():
    return load_model("base")


@pytest.fixture(scope="module")
def spec(model):
    return expected_tensor_spec(model.config)


@pytest.fixture()
def personal_dir(tmp_path: Path, model) -> Path:
    """Client 1 replaces the embedding, client 2 a layer norm, clients 0 and 3 are empty."""
    live = disk_state_dict(model)
    norm = next(name for name in live if name.endswith("final_layer_norm.weight"))
    return write_personalisations(tmp_path / "personal", {
        1: {EMBEDDING: live[EMBEDDING] + 0.5},
        2: {norm: torch.ones_like(live[norm])},
    }, K)


def test_written_personalisations_read_back(personal_dir: Path, spec, model) -> None:
    personal = read_personalisations(personal_dir, spec, K)
    assert sorted(p.name for p in personal_dir.iterdir()) == [
        f"client_{k}.safetensors" for k in range(K)]
    assert not list(personal_dir.parent.glob(".personal*"))  # no staging left behind
    assert personal.names[1] == (EMBEDDING,) and personal.is_empty(0) and personal.is_empty(3)
    assert personal.load(0) == {} and personal.total_bytes == sum(personal.sizes.values())
    assert torch.equal(personal.load(1)[EMBEDDING], disk_state_dict(model)[EMBEDDING] + 0.5)
    (personal_dir / "client_3.safetensors").write_bytes(b"")  # zero bytes: the global model
    assert read_personalisations(personal_dir, spec, K).is_empty(3)


def test_applying_a_personalisation_changes_the_model_and_restores_it_bit_for_bit(
    personal_dir: Path, spec, model
) -> None:
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    tensors = read_personalisations(personal_dir, spec, K).load(1)
    with personalised(model, tensors) as inside:
        assert inside is model
        assert torch.equal(model.language_backbone.shared.weight, before[
            "language_backbone.shared.weight"] + 0.5)
        # the tied output projection follows the embedding it shares storage with
        assert torch.equal(model.language_backbone.lm_head.weight,
                           model.language_backbone.shared.weight)
    with pytest.raises(RuntimeError, match="boom"), personalised(model, tensors):
        raise RuntimeError("boom")
    after = model.state_dict()
    assert after.keys() == before.keys()
    assert all(torch.equal(before[name], after[name]) for name in before)
    with pytest.raises(PersonalisationError, match="not a tensor of the global model"):
        with personalised(model, {"language_backbone.nope": torch.zeros(1)}):
            pass


def test_the_delta_keeps_only_changed_tensors(model) -> None:
    live = disk_state_dict(model)
    personal = {name: tensor.clone() for name, tensor in live.items()}
    personal[EMBEDDING][0, 0] += 1.0
    delta = personalisation_delta(live, personal)
    assert list(delta) == [EMBEDDING] and delta[EMBEDDING][0, 0] == live[EMBEDDING][0, 0] + 1
    assert personalisation_delta(live, live) == {}


def _break(directory: Path, how: str, spec) -> str:
    """Make one kind of bad personalisation; return the expected reason."""
    name = EMBEDDING
    shape, _ = spec[name]
    good = torch.zeros(shape)
    if how == "missing client":
        (directory / "client_2.safetensors").unlink()
        return r"no file for client\(s\) \[2\]"
    if how == "extra file":
        (directory / "notes.txt").write_text("hi")
        return "unexpected entry"
    if how == "client out of range":
        save_file({}, directory / f"client_{K}.safetensors")
        return f"client {K} is out of range"
    if how == "leading zero":
        save_file({}, directory / "client_01.safetensors")
        return "unexpected entry"
    if how == "wrong shape":
        save_file({name: torch.zeros(3, 3)}, directory / "client_1.safetensors")
        return "has shape"
    if how == "wrong dtype":
        save_file({name: good.half()}, directory / "client_1.safetensors")
        return "has dtype F16"
    if how == "unknown name":
        save_file({"head.weight": torch.zeros(2)}, directory / "client_1.safetensors")
        return "unexpected tensor"
    if how == "nan":
        bad = good.clone()
        bad[1, 1] = float("nan")
        save_file({name: bad}, directory / "client_1.safetensors")
        return "NaN or infinite"
    if how == "infinity":
        save_file({name: good + float("inf")}, directory / "client_1.safetensors")
        return "NaN or infinite"
    if how == "pickle":
        (directory / "client_1.safetensors").write_bytes(pickle.dumps({name: good}))
        return "pickle"
    if how == "truncated":
        path = directory / "client_1.safetensors"
        path.write_bytes(path.read_bytes()[:-100])
        return "truncated"
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["missing client", "extra file", "client out of range",
                                 "leading zero", "wrong shape", "wrong dtype", "unknown name",
                                 "nan", "infinity", "pickle", "truncated"])
def test_bad_personalisations_are_refused_with_the_reason(personal_dir: Path, spec,
                                                          how: str) -> None:
    reason = _break(personal_dir, how, spec)
    with pytest.raises(PersonalisationError, match=reason):
        read_personalisations(personal_dir, spec, K)


def test_size_limits_per_file_and_in_total(personal_dir: Path, spec) -> None:
    largest = max(p.stat().st_size for p in personal_dir.iterdir())
    with pytest.raises(PersonalisationError, match="per file"):
        read_personalisations(personal_dir, spec, K, max_file_bytes=largest - 1)
    total = sum(p.stat().st_size for p in personal_dir.iterdir())
    with pytest.raises(PersonalisationError, match="in all exceed"):
        read_personalisations(personal_dir, spec, K, max_total_bytes=total - 1)
    assert read_personalisations(personal_dir, spec, K, max_file_bytes=largest,
                                 max_total_bytes=total).total_bytes == total


def test_a_file_or_missing_directory_is_not_a_personal_directory(tmp_path: Path, spec) -> None:
    (tmp_path / "personal").write_text("x")
    with pytest.raises(PersonalisationError, match="not a directory"):
        read_personalisations(tmp_path / "personal", spec, K)
    with pytest.raises(PersonalisationError, match="not a directory"):
        read_personalisations(tmp_path / "absent", spec, K)
    with pytest.raises(ValueError, match=r"client\(s\) \[7\]"):
        write_personalisations(tmp_path / "out", {7: {}}, K)
    assert not (tmp_path / "out").exists()
