"""`pflkit train` writes its recipe, and `pflkit train --recipe` trains the same run again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from baselines.cli import train
from benchmark.provenance import kit_source_digest, machine_label, training_data_fingerprint
from tests.baselines.test_cpu_pins import COMMON


def _train(*args: str):
    return CliRunner().invoke(train, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def run(tmp_path_factory, tiny_data: Path, tiny_base: Path) -> Path:
    out = tmp_path_factory.mktemp("recipe") / "run"
    result = _train("--preset", "fedprox", "--data", str(tiny_data), "--out", str(out),
                    "--base", str(tiny_base), *COMMON)  # fmt: skip
    assert result.exit_code == 0, result.output
    return out


def test_the_recipe_names_what_trained_the_run(run: Path, tiny_data: Path) -> None:
    recipe = json.loads((run / "recipe.json").read_text())
    config = json.loads((run / "config.json").read_text())["config"]
    assert recipe["config"] == config and recipe["config"]["seed"] == 0
    assert recipe["data"]["fingerprint"] == training_data_fingerprint(tiny_data)
    assert recipe["kit"]["source_sha256"] == kit_source_digest()
    assert recipe["machine"] == {"label": machine_label(), "threads": 1, "device": "cpu"}
    assert set(recipe["files"]) == {"baselines/methods/fedprox.py",
                                    "baselines/strategies/fedavg.py",
                                    "baselines/optimizers/adamw.py", "baselines/wire/fp32.py"}
    assert "class FedProx" in recipe["files"]["baselines/methods/fedprox.py"]


def test_the_files_reference_names_every_key_the_run_wrote(run: Path) -> None:
    """The tables of docs/reference/files.md, generated from these schemas, hold every key of
    the run's recipe.json and submission.json (a nested object's as ``parent.key``)."""
    from dataclasses import fields

    from benchmark.recipe import Recipe
    from evaluator.submission_metadata import OTHER_KEYS, SubmissionMetadata

    recipe = json.loads((run / "recipe.json").read_text())
    written = set()
    for key, value in recipe.items():  # config and files are objects of free keys
        nested = isinstance(value, dict) and key not in ("config", "files")
        written |= {f"{key}.{inner}" for inner in value} if nested else {key}
    assert written == {"format", *(field.metadata["key"] for field in fields(Recipe))}
    submission = json.loads((run / "submission.json").read_text())
    documented = {*SubmissionMetadata.model_fields, *(key for keys in OTHER_KEYS for key in keys)}
    assert not set(submission) - documented, "document it in evaluator/submission_metadata.py"


def test_training_the_recipe_again_gives_the_same_bytes(run, tiny_data, tiny_base, tmp_path):
    again = tmp_path / "again"
    result = _train("--recipe", str(run / "recipe.json"), "--data", str(tiny_data), "--out",
                    str(again), "--base", str(tiny_base), "--no-progress")  # fmt: skip
    assert result.exit_code == 0, result.output
    for name in ("communication_log.csv", "communication_log.jsonl", "checkpoint/model.safetensors"):
        assert (again / name).read_bytes() == (run / name).read_bytes(), name
    lines = [json.loads(line) for line in (again / "communication_log.jsonl").read_text().splitlines()]
    assert all(len(m["tensor_sha256"]) == len(m["parameters"]) for m in lines)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--rounds", "3"), "--recipe trains the recipe as it is; drop --rounds"),
        (("--quantize", "nf4"), "drop --quantize"),
        (("--preset", "fedavg"), "the recipe is a 'fedprox' run, not 'fedavg'"),
    ],
)
def test_a_recipe_is_trained_as_it_is(run, tiny_data, tmp_path, extra, message) -> None:
    result = CliRunner().invoke(train, ["--recipe", str(run / "recipe.json"), "--data",
                                        str(tiny_data), "--out", str(tmp_path / "x"), *extra])
    assert result.exit_code == 2 and message in result.output, result.output


def test_an_unreadable_recipe_is_a_usage_error(tiny_data, tmp_path) -> None:
    bad = tmp_path / "recipe.json"
    bad.write_text('{"format": 1, "config": {"preset": "fedavg"}, "format": 2}')
    result = CliRunner().invoke(train, ["--recipe", str(bad), "--data", str(tiny_data), "--out",
                                        str(tmp_path / "x")])  # fmt: skip
    assert result.exit_code == 2 and "recipe:" in result.output and "twice" in result.output


def test_a_kit_run_from_its_source_tree_writes_its_recipe(monkeypatch, tiny_data: Path,
                                                          tiny_base: Path, tmp_path: Path) -> None:
    """A lent GPU machine runs the kit from ``PYTHONPATH``, not installed: `pflkit train` still
    trains and its recipe says the version is unknown instead of failing."""
    from importlib import metadata

    def not_installed(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", not_installed)
    out = tmp_path / "run"
    result = _train("--preset", "fedavg", "--data", str(tiny_data), "--out", str(out),
                    "--base", str(tiny_base), *COMMON)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads((out / "recipe.json").read_text())["kit"]["version"] == "0+unknown"
