"""What the Flower tests share: Flower's environment and the comparison with the in-process run.

The Flower tests run ``.venv-flower`` (``make flower-setup``) in subprocesses and skip without it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from baselines.engine import FederatedSimulation
from baselines.presets import preset_config
from baselines.run_directory import RunDirectory
from baselines.vt5_task import build_vt5_task

REPO = Path(__file__).resolve().parents[2]
FLOWER_BIN = REPO / ".venv-flower" / "bin"


def skip_without_flower() -> None:
    """Skip the calling test module when ``.venv-flower`` is missing."""
    if not (FLOWER_BIN / "flower-superlink").exists():
        pytest.skip("Flower's environment .venv-flower is missing: run `make flower-setup`",
                    allow_module_level=True)


def global_weights(run: Path) -> dict[str, torch.Tensor]:
    """The run's last committed global weights."""
    latest = json.loads((run / "state" / "latest.json").read_text())
    return load_file(run / "state" / latest["dir"] / "global.safetensors")


def without_times(path: Path) -> list:
    """A CSV's lines, or a JSONL file's rows without their ``*_seconds`` fields."""
    if path.suffix == ".csv":
        return path.read_text().splitlines()
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [{k: v for k, v in row.items() if not k.endswith("_seconds")} for row in rows]


def run_in_process(preset: str, options: dict, data: Path, base: Path, out: Path) -> None:
    """The preset on the in-process engine (no evaluation)."""
    config = preset_config(preset, val_limit=0, **options)
    task = build_vt5_task(data, base, val_limit=0, progress=False)
    FederatedSimulation(config, task, RunDirectory(out), progress=False).run()


def assert_same_run(flower: Path, in_process: Path) -> None:
    """Same log, metrics, privacy declaration and final global weights (1e-6)."""
    for name in ("communication_log.csv", "communication_log.jsonl", "metrics.jsonl"):
        assert without_times(flower / name) == without_times(in_process / name), name
    if (in_process / "privacy.json").exists():
        assert (flower / "privacy.json").read_text() == (in_process / "privacy.json").read_text()
    first, second = global_weights(in_process), global_weights(flower)
    assert first.keys() == second.keys()
    for name, value in first.items():
        torch.testing.assert_close(second[name], value, rtol=0, atol=1e-6, msg=name)
