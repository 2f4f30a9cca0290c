"""Track-3 scoring on generated `tiny` data with the shipped base model, figures checked by hand."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from benchmark.data import load_split, personal_splits
from benchmark.evaluation import evaluate, evaluate_personalised
from benchmark.model import (
    disk_state_dict,
    expected_tensor_spec,
    load_model,
    load_processor,
    read_personalisations,
    write_personalisations,
)
from pflkit.cli import main

EMBEDDING = "language_backbone.shared.weight"


@pytest.fixture(scope="module")
def base():
    return load_model("base"), load_processor("base")


@pytest.fixture(scope="module")
def test_split(tiny_data: Path):
    return load_split(tiny_data, "test")


@pytest.fixture(scope="module")
def global_scores(base, test_split, tmp_path_factory) -> dict[int, float]:
    """Question id -> the global model's ANLS, from the ordinary evaluation loop."""
    model, processor = base
    result = evaluate(model, processor, test_split, progress=False,
                      cache_dir=tmp_path_factory.mktemp("cache"))
    return {p.question_id: p.anls for p in result.predictions}


def _by_hand(splits, scores: dict[int, float]) -> dict[int, float]:
    return {k: float(np.mean([scores[q] for q in qids])) for k, qids in splits.clients.items()
            if qids}


def test_a_personalisation_equal_to_the_global_weights_gives_the_global_figures(
    base, test_split, tiny_data: Path, global_scores, tmp_path: Path
) -> None:
    model, processor = base
    splits = personal_splits(tiny_data, "test")
    copy = {name: tensor.clone() for name, tensor in disk_state_dict(model).items()}
    result = evaluate_personalised(model, processor, test_split, splits, lambda k: copy,
                                   progress=False, cache_dir=tmp_path)
    expected = _by_hand(splits, global_scores)
    assert all(c.personalised for c in result.clients)
    for score in result.clients:
        if score.n:
            assert score.personal_anls == pytest.approx(expected[score.client], abs=1e-12)
            assert score.global_anls == pytest.approx(expected[score.client], abs=1e-12)
        else:
            assert score.personal_anls is None and score.global_anls is None
    personal_qids = [q for qids in splits.clients.values() for q in qids]
    in_anls = float(np.mean([global_scores[q] for q in personal_qids]))
    assert result.personal_anls == pytest.approx(in_anls) and result.global_personal_anls == (
        pytest.approx(in_anls))
    assert result.unseen_anls == pytest.approx(np.mean([global_scores[q] for q in splits.unseen]))
    assert result.n == len(personal_qids) and result.unseen_n == len(splits.unseen)
    assert result.personal_anls_std == pytest.approx(np.std(list(expected.values())))
    assert 0 < result.personal_anls < 1 and result.unseen_anls > 0  # the base reads a little


def test_a_destroyed_personalisation_scores_zero_for_its_client_only(
    base, test_split, tiny_data: Path, global_scores, tmp_path: Path
) -> None:
    model, processor = base
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    splits = personal_splits(tiny_data, "test")
    expected = _by_hand(splits, global_scores)
    victim = max((k for k in expected if expected[k] > 0), key=lambda k: len(splits.clients[k]))
    # a zero embedding (tied to the output layer) gives every answer the empty string: ANLS 0
    zero = {EMBEDDING: torch.zeros_like(disk_state_dict(model)[EMBEDDING])}
    result = evaluate_personalised(model, processor, test_split, splits,
                                   lambda k: zero if k == victim else {}, progress=False,
                                   cache_dir=tmp_path)
    expected[victim] = 0.0
    personal_qids = [q for qids in splits.clients.values() for q in qids]
    total = sum(global_scores[q] for q in personal_qids) - sum(
        global_scores[q] for q in splits.clients[victim])
    assert result.personal_anls == pytest.approx(total / len(personal_qids))
    assert result.worst_client == victim and result.worst_anls == 0.0
    assert result.personal_anls_std == pytest.approx(np.std(list(expected.values())))
    by_client = {c.client: c for c in result.clients}
    assert by_client[victim].global_anls > 0 and by_client[victim].personalised
    assert not any(c.personalised for c in result.clients if c.client != victim)
    after = model.state_dict()  # the global model is bit-identical afterwards
    assert all(torch.equal(before[name], after[name]) for name in before)
    assert result.global_personal_anls == pytest.approx(
        np.mean([global_scores[q] for q in personal_qids]))


def test_pflkit_evaluate_scores_a_personal_directory(base, tiny_data: Path, tmp_path: Path,
                                                     global_scores) -> None:
    model, _ = base
    splits = personal_splits(tiny_data, "test")
    victim = next(k for k, qids in splits.clients.items() if qids)
    zero = {EMBEDDING: torch.zeros_like(disk_state_dict(model)[EMBEDDING])}
    personal = write_personalisations(tmp_path / "personal", {victim: zero}, 10)
    read_personalisations(personal, expected_tensor_spec(model.config), 10)
    args = ["evaluate", "base", "--data", str(tiny_data), "--split", "test", "--personal",
            str(personal)]
    result = CliRunner().invoke(main, [*args, "--json"])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    assert figures["clients"][victim]["personal_anls"] == 0.0
    assert figures["unseen_anls"] == pytest.approx(
        np.mean([global_scores[q] for q in splits.unseen]))
    table = CliRunner().invoke(main, args, terminal_width=140)
    assert table.exit_code == 0 and "mean (by questions)" in table.output
    (personal / "client_9.safetensors").unlink()
    refused = CliRunner().invoke(main, args)
    assert refused.exit_code != 0 and "no file for client(s) [9]" in refused.output
