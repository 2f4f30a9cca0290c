"""Another family's pre-training (`pflkit pretrain --family`): loss, curve, checkpoints, resumption."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file

from benchmark.pretraining.family_qa import batch_rows, open_family_run, pretrain_family
from benchmark.pretraining.family_recipe import FamilyRecipe, family_recipe, resumed_recipe
from benchmark.pretraining.trainer import CURVE, latest_checkpoint

#: Eight steps of four questions, a point and a checkpoint every four.
MICRO = {"total_steps": 8, "batch_size": 4, "learning_rate": 3e-3, "warmup_steps": 1,
         "eval_every": 4, "checkpoint_every": 4, "eval_questions": 6}  # fmt: skip


def _curve(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / CURVE).read_text().splitlines()]


def _run(public: Path, run_dir: Path, recipe: FamilyRecipe, max_steps: int | None = None) -> dict:
    model, processor, training, validation = open_family_run(public, run_dir, recipe)
    return pretrain_family(model, processor, training, validation, run_dir, recipe,
                           max_steps=max_steps, progress=False)  # fmt: skip


@pytest.mark.parametrize("family", ["pix2struct", "idefics3"])
def test_a_few_steps_lower_the_loss_and_write_the_curve(tiny_benchmark: Path, tmp_path: Path,
                                                        family: str) -> None:  # fmt: skip
    torch.set_num_threads(1)
    run_dir = tmp_path / family
    last = _run(tiny_benchmark / "public", run_dir, family_recipe(family, **MICRO))
    curve = _curve(run_dir)
    assert [point["step"] for point in curve] == [4, 8]
    assert curve[-1]["loss"] < curve[0]["loss"]
    assert last == curve[-1] and 0.0 <= last["val_anls"] <= 1.0 and last["n"] == 6
    assert 0.0 <= last["answer_prior_anls"] <= 1.0
    assert json.loads((run_dir / "recipe.json").read_text())["family"] == family


def test_the_checkpoint_loads_and_answers(tiny_benchmark: Path, tmp_path: Path) -> None:
    from benchmark.data import load_split
    from benchmark.evaluation import evaluate
    from benchmark.model import load_model, load_processor

    run_dir = tmp_path / "run"
    _run(tiny_benchmark / "public", run_dir, family_recipe("pix2struct", **MICRO))
    checkpoint = latest_checkpoint(run_dir)
    assert checkpoint is not None and checkpoint.name == "step-000008"
    model = load_model(checkpoint)
    assert model.config.model_type == "pix2struct"
    questions = load_split(tiny_benchmark / "public", "val").select(range(3))
    result = evaluate(model, load_processor(checkpoint), questions, progress=False)
    assert result.n == 3 and len(result.predictions) == 3


def test_a_resumed_run_continues_from_its_last_step(tiny_benchmark: Path, tmp_path: Path) -> None:
    torch.set_num_threads(1)
    public, recipe = tiny_benchmark / "public", family_recipe("pix2struct", **MICRO)
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    _run(public, straight, recipe)
    _run(public, resumed, recipe, max_steps=4)
    assert latest_checkpoint(resumed).name == "step-000004"
    _run(public, resumed, resumed_recipe(resumed, "pix2struct"))
    assert [point["step"] for point in _curve(resumed)] == [4, 8]
    expected = load_file(str(latest_checkpoint(straight) / "model.safetensors"))
    actual = load_file(str(latest_checkpoint(resumed) / "model.safetensors"))
    assert expected.keys() == actual.keys()
    for name in expected:
        torch.testing.assert_close(actual[name], expected[name], rtol=0, atol=1e-5)


def test_the_batches_walk_through_every_question_once_an_epoch() -> None:
    records = [{"question": str(i)} for i in range(10)]
    recipe = FamilyRecipe(family="pix2struct", batch_size=5)
    first_epoch = batch_rows(records, 0, recipe) + batch_rows(records, 1, recipe)
    assert sorted(int(row["question"]) for row in first_epoch) == list(range(10))
    assert batch_rows(records, 3, recipe) == batch_rows(records, 3, recipe)


def test_vt5_keeps_its_own_recipe() -> None:
    with pytest.raises(ValueError, match="own recipe"):
        FamilyRecipe(family="vt5")


def test_cli_pretrains_a_family_and_plots_its_curve(tiny_benchmark: Path, tmp_path: Path) -> None:
    from benchmark.pretraining.cli import pretrain

    run_dir = tmp_path / "cli"
    result = CliRunner().invoke(pretrain, ["--data", str(tiny_benchmark), "--out", str(run_dir),
                                           "--family", "idefics3", "--steps", "2"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert [point["step"] for point in _curve(run_dir)] == [2]
    assert (run_dir / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    other = CliRunner().invoke(pretrain, ["--data", str(tiny_benchmark), "--out", str(run_dir),
                                          "--family", "pix2struct"])  # fmt: skip
    assert other.exit_code != 0 and "--family idefics3" in other.output


def test_cli_family_vt5_runs_the_existing_recipe(tiny_benchmark: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """`--family vt5` (the default) hands VT5's own recipe to VT5's loop, not the family loop."""
    import benchmark.pretraining.family_qa as family_qa
    import benchmark.pretraining.run as run
    import benchmark.pretraining.trainer as trainer
    from benchmark.pretraining.cli import pretrain
    from benchmark.pretraining.recipe import TINY_RECIPE

    calls: list[tuple] = []
    monkeypatch.setattr(run, "open_run", lambda public, out, recipe: (
        calls.append(("open", public, recipe)) or ("model", "processor", "train", "val")))
    monkeypatch.setattr(trainer, "pretrain", lambda *args, **kwargs: (
        calls.append(("pretrain", args[-1], kwargs)) or {"step": 1}))
    monkeypatch.setattr(family_qa, "pretrain_family", lambda *a, **k: pytest.fail("family loop"))
    result = CliRunner().invoke(pretrain, ["--data", str(tiny_benchmark), "--family", "vt5",
                                           "--out", str(tmp_path / "vt5"), "--max-steps", "1"])
    assert result.exit_code == 0, result.output
    assert calls == [("open", tiny_benchmark / "public", TINY_RECIPE),
                     ("pretrain", TINY_RECIPE, {"max_steps": 1})]  # fmt: skip
    refused = CliRunner().invoke(pretrain, ["--data", str(tiny_benchmark), "--out",
                                            str(tmp_path / "v"), "--steps", "3"])  # fmt: skip
    assert refused.exit_code != 0 and "--steps is for another family" in refused.output
