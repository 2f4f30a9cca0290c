"""The optional ``recipe`` part on a real server: stored for the organisers' re-run, refused
when the re-run could not read it or it names another run, and shown nowhere."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from benchmark.provenance import KIT_ROOT
from tests.evaluator.conftest import LiveServer
from tests.evaluator.test_api import assert_nothing_stored, upload


def _recipe(preset: str = "fedavg", **changes: object) -> dict:
    recipe = {
        "format": 1,
        "config": {"preset": preset, "method": "full", "seed": 1234567},
        "base": {"name": "base", "sha256": "a" * 64},
        "data": {"fingerprint": "b" * 64},
        "kit": {"version": "0.1.0", "source_sha256": "c" * 64},
        "machine": {"label": "AMD EPYC, AVX512, torch 2.13.0+cpu", "threads": 1,
                    "device": "cpu"},
        "files": {"baselines/methods/full.py":
                  (KIT_ROOT / "baselines" / "methods" / "full.py").read_text()},
    }  # fmt: skip
    recipe.update(changes)
    return recipe


def _with_recipe(recipe: dict | str) -> dict:
    text = recipe if isinstance(recipe, str) else json.dumps(recipe)
    return {"recipe": ("recipe.json", text, "application/json")}


@pytest.fixture
def model_bytes(tiny_reference: Path) -> bytes:
    return (tiny_reference / "model.safetensors").read_bytes()


def test_a_recipe_is_stored_and_never_shown(
    live_server: LiveServer, teams: dict, model_bytes: bytes, settings
) -> None:  # type: ignore[no-untyped-def]
    response = upload(live_server.url, teams["alpha"], model=model_bytes,
                      extra=_with_recipe(_recipe()))  # fmt: skip
    assert response.status_code == 202, response.text
    stored = Path(settings.storage_dir) / "submissions" / response.json()["id"] / "recipe.json"
    assert json.loads(stored.read_text())["config"]["seed"] == 1234567
    for token in (teams["alpha"], teams["org"]):
        shown = httpx.get(response.json()["url"], headers={"Authorization": f"Bearer {token}"})
        assert shown.status_code == 200 and "1234567" not in shown.text
    for page in ("/leaderboard", "/leaderboard.json", "/api/v1/leaderboard"):
        answer = httpx.get(f"{live_server.url}{page}")
        assert "1234567" not in answer.text


@pytest.mark.parametrize(
    ("recipe", "message"),
    [
        ("{not json", "recipe: "),
        (_recipe(format=2), "format must be 1"),
        (_recipe(files={"evaluator/worker/runner.py": "import os"}), "not a one-file component"),
        (_recipe(machine={"label": "x", "threads": 0, "device": "cpu"}), "machine.threads"),
        (_recipe("lora"), "trains the preset 'lora' but submission.json names the method"),
    ],
)
def test_a_recipe_the_rerun_could_not_use_is_refused(
    live_server: LiveServer, teams: dict, model_bytes: bytes, settings, recipe, message
) -> None:  # type: ignore[no-untyped-def]
    response = upload(live_server.url, teams["alpha"], model=model_bytes,
                      extra=_with_recipe(recipe))  # fmt: skip
    assert response.status_code == 422, response.text
    assert message in response.text and "recipe" in response.text
    assert_nothing_stored(settings)
