"""The pre-training loop: learning-rate schedule, checkpoints and exact resumption."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from benchmark.pretraining.recipe import TINY_RECIPE, PretrainingRecipe, Stage
from benchmark.pretraining.run import open_run
from benchmark.pretraining.trainer import CURVE, latest_checkpoint, learning_rate_at, pretrain

MICRO = dataclasses.replace(
    TINY_RECIPE,
    vocab_size=300,
    language_config={"d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 1,
                     "num_decoder_layers": 1, "num_heads": 4, "dropout_rate": 0.0},
    visual_config={**TINY_RECIPE.visual_config, "hidden_size": 16, "intermediate_size": 32},
    spatial_embedding_dim=8,
    stages=(Stage(steps=2, window_words=6, reading_share=0.5), Stage(steps=2, window_words=None,
                                                                     reading_share=0.2)),
    batch_size=4,
    warmup_steps=2,
    eval_every=4,
    checkpoint_every=2,
    eval_questions=8,
)


def test_learning_rate_warms_up_then_decays_to_the_floor() -> None:
    recipe = PretrainingRecipe()
    rates = [learning_rate_at(step, recipe) for step in range(recipe.total_steps)]
    assert rates[0] == pytest.approx(recipe.learning_rate / recipe.warmup_steps)
    assert max(rates) == pytest.approx(recipe.learning_rate)
    assert rates[-1] == pytest.approx(recipe.min_learning_rate, rel=1e-3)
    after_warmup = rates[recipe.warmup_steps :]
    assert all(a >= b for a, b in zip(after_warmup, after_warmup[1:], strict=False))


def test_stage_boundaries() -> None:
    recipe = PretrainingRecipe()
    first = recipe.stages[0]
    assert recipe.stage_at(0) == first
    assert recipe.stage_at(first.steps - 1) == first
    assert recipe.stage_at(first.steps) == recipe.stages[1]
    assert recipe.stage_at(10**9) == recipe.stages[-1]


def _weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return load_file(str(latest_checkpoint(run_dir) / "model.safetensors"))


def test_resumed_run_equals_uninterrupted_run(tiny_benchmark: Path, tmp_path: Path) -> None:
    torch.set_num_threads(1)
    public = tiny_benchmark / "public"
    straight = tmp_path / "straight"
    model, processor, training, validation = open_run(public, straight, MICRO)
    last = pretrain(model, processor, training, validation, straight, MICRO, progress=False)
    assert last["step"] == 4 and 0.0 <= last["heldout_value_anls"] <= 1.0
    assert 0.0 <= last["heldout_value_anls_moved_layout"] <= 1.0
    curve = [json.loads(line) for line in (straight / CURVE).read_text().splitlines()]
    assert [entry["step"] for entry in curve] == [4]

    resumed = tmp_path / "resumed"
    model, processor, training, validation = open_run(public, resumed, MICRO)
    pretrain(model, processor, training, validation, resumed, MICRO, max_steps=2, progress=False)
    assert latest_checkpoint(resumed).name == "step-000002"
    model, processor, training, validation = open_run(public, resumed, MICRO)
    pretrain(model, processor, training, validation, resumed, MICRO, progress=False)

    expected, actual = _weights(straight), _weights(resumed)
    assert expected.keys() == actual.keys()
    for name in expected:
        torch.testing.assert_close(actual[name], expected[name], rtol=0, atol=1e-6)


def test_resuming_under_another_recipe_is_refused(tiny_benchmark: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    open_run(tiny_benchmark / "public", run_dir, MICRO)
    other = dataclasses.replace(MICRO, learning_rate=1.0)
    with pytest.raises(ValueError, match="another recipe"):
        open_run(tiny_benchmark / "public", run_dir, other)
