"""What the Flower tests share: Flower's environment and the comparison with the in-process run.

The Flower tests run ``.venv-flower`` (``make flower-setup``) in subprocesses and skip without it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from baselines.engine.document_task import build_task
from baselines.engine.simulation import FederatedSimulation
from baselines.presets import preset_config
from baselines.run_directory import RunDirectory

REPO = Path(__file__).resolve().parents[2]
FLOWER_BIN = REPO / ".venv-flower" / "bin"


def skip_without_flower() -> None:
    """Skip the calling test module when ``.venv-flower`` is missing."""
    if not (FLOWER_BIN / "flower-superlink").exists():
        pytest.skip(
            "Flower's environment .venv-flower is missing: run `make flower-setup`",
            allow_module_level=True,
        )


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
    task = build_task(data, base, val_limit=0, progress=False)
    FederatedSimulation(config, task, RunDirectory(out), progress=False).run()


#: Round metrics computed from a private client's data without noise: the in-process engine logs
#: them, a client on a real network does not send them (``ClientReply.for_the_wire``).
UNSENT_PRIVATE_METRICS = ("train_loss", "privacy")


def assert_same_run(flower: Path, in_process: Path) -> None:
    """Same log, metrics, privacy declaration and final global weights (1e-6).

    A private run's Flower metrics are the in-process ones without :data:`UNSENT_PRIVATE_METRICS`.
    """
    for name in ("communication_log.csv", "communication_log.jsonl"):
        assert without_times(flower / name) == without_times(in_process / name), name
    expected = without_times(in_process / "metrics.jsonl")
    if (in_process / "privacy.json").exists():
        assert (flower / "privacy.json").read_text() == (in_process / "privacy.json").read_text()
        assert all(key in row for row in expected for key in UNSENT_PRIVATE_METRICS)
        expected = [
            {k: v for k, v in row.items() if k not in UNSENT_PRIVATE_METRICS} for row in expected
        ]
    assert without_times(flower / "metrics.jsonl") == expected, "metrics.jsonl"
    first, second = global_weights(in_process), global_weights(flower)
    assert first.keys() == second.keys()
    for name, value in first.items():
        torch.testing.assert_close(second[name], value, rtol=0, atol=1e-6, msg=name)
