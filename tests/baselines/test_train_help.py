"""``pflkit train --help`` from the registries' light copy (``baselines/train_help.json``).

The copy must say what the registries say (after adding a method, strategy, optimiser or
option: ``python -m baselines.train_help``); a help is built from it, a run from the registries.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from baselines import train_help
from baselines.cli import _HELP_ONLY, _registry_options, train


@pytest.fixture(autouse=True)
def _fresh_options():
    """Each test builds the registry options anew (they are cached per process)."""
    _registry_options.cache_clear()
    yield
    _registry_options.cache_clear()


def test_the_copy_says_what_the_registries_say() -> None:
    assert train_help.read_copy() == train_help.describe_registries(), (
        "baselines/train_help.json is stale: run `python -m baselines.train_help`"
    )


def _help(*, help_only: bool) -> str:
    ctx = click.Context(train, info_name="train", terminal_width=100)
    ctx.meta[_HELP_ONLY] = help_only
    return train.get_help(ctx)


def test_the_help_from_the_copy_is_the_help_from_the_registries() -> None:
    from_copy = _help(help_only=True)
    assert from_copy == _help(help_only=False)
    assert "--lora-rank" in from_copy and "one of fedavg, lora," in from_copy


def test_a_help_reads_the_copy_and_a_run_the_registries(tmp_path: Path, monkeypatch) -> None:
    stale = tmp_path / "train_help.json"
    description = train_help.describe_registries()
    stale.write_text(json.dumps({**description, "presets": ["only-in-the-copy"]}))
    monkeypatch.setattr(train_help, "COPY", stale)
    result = CliRunner().invoke(train, ["--help"], terminal_width=100)
    assert result.exit_code == 0 and "one of only-in-the-copy." in result.output
    # A run parses its options with the registries' (the copy can change a help, never a run).
    ctx = train.make_context("train", ["--data", "d", "--out", "o", "--preset", "lora"])
    names = {param.name for param in train.get_params(ctx)}
    assert {spec["key"] for spec in description["options"]} <= names
    preset = next(param for param in train.get_params(ctx) if param.name == "preset")
    assert "only-in-the-copy" not in preset.help


def test_a_missing_copy_falls_back_to_the_registries(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(train_help, "COPY", tmp_path / "missing.json")
    assert train_help.read_copy() is None
    result = CliRunner().invoke(train, ["--help"], terminal_width=100)
    assert result.exit_code == 0 and "--fedprox-mu" in result.output
