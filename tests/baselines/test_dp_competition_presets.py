"""The competition-size DP presets: their shape, and noise calibrated to 1/4/8 that verifies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from baselines.presets import DP_COMPETITION_PRESETS, DP_PRESETS, all_presets, preset_config
from baselines.privacy.plan import make_plan
from benchmark.privacy_file import write_privacy_file
from pflkit.dp import verify_command

#: the fewest providers at a client of the ``dp`` scale and of PFL-DocVQA (client 0).
FEWEST_PROVIDERS = 400
SHAPES = {  # preset -> (rounds, providers per round, sampling rate 0.2 x m / 400)
    "dp-fedavg-competition": (5, 50, 0.025),
    "dp-lora-competition": (30, 45, 0.0225),
}


def test_competition_presets_do_not_touch_the_mini_ones() -> None:
    assert set(DP_COMPETITION_PRESETS) == set(SHAPES)
    assert not set(DP_COMPETITION_PRESETS) & set(DP_PRESETS)
    assert set(DP_COMPETITION_PRESETS) <= set(all_presets())
    assert "providers_per_round" not in DP_PRESETS["dp-fedavg"]  # mini: 50/400 of the fewest
    lora = preset_config("dp-lora-competition", epsilon=1.0)
    assert lora.options["lora_rank"] == 16 and tuple(lora.options["lora_targets"]) == ("q", "v")
    assert preset_config("dp-lora", epsilon=1.0).options["lora_rank"] == 6


@pytest.mark.parametrize("preset", sorted(SHAPES))
@pytest.mark.parametrize("epsilon", [1.0, 4.0, 8.0])
def test_noise_calibrated_to_the_budget_verifies(
    preset: str, epsilon: float, tmp_path: Path
) -> None:
    rounds, providers, rate = SHAPES[preset]
    config = preset_config(preset, epsilon=epsilon)
    assert (config.rounds, config.clients_per_round) == (rounds, 2)
    assert config.options["server_lr"] == 1.0 and config.options["clipping_norm"] == 0.5
    method = config.build_method()
    plan = make_plan(
        method.options,
        rounds=config.rounds,
        clients=10,
        clients_per_round=config.clients_per_round,
        fewest_providers=FEWEST_PROVIDERS,
    )
    assert plan.providers_per_round == providers and plan.sample_rate == pytest.approx(rate)
    path = write_privacy_file(tmp_path / "privacy.json", plan.declaration())
    result = CliRunner().invoke(verify_command, [str(path), "--json"])  # pflkit dp verify
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["passed"] and report["epsilon"]["rdp"] <= epsilon
    assert report["sample_rate"] == pytest.approx(rate)
