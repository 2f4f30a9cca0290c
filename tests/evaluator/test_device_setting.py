"""The scoring worker's device and precision settings (CPU here; CUDA paths fail clearly)."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
import torch
from pydantic import ValidationError

from evaluator.cli import check_device
from evaluator.core.config import Settings
from evaluator.scoring import Scorer
from tests.evaluator.factories import write_benchmark


@pytest.mark.parametrize("device", ["auto", "cpu", "cuda", "cuda:1"])
def test_device_names_are_accepted(tmp_path: Path, device: str) -> None:
    assert Settings(storage_dir=tmp_path, device=device).device == device


@pytest.mark.parametrize("device", ["tpu", "cuda:x", "gpu", "cpu;rm", ""])
def test_other_device_names_are_refused(tmp_path: Path, device: str) -> None:
    with pytest.raises(ValidationError, match="device"):
        Settings(storage_dir=tmp_path, device=device)
    with pytest.raises(ValidationError, match="precision"):
        Settings(storage_dir=tmp_path, precision="fp8")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_cuda_without_a_gpu_stops_the_worker_at_start(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PFLKIT_EVALUATOR_DEVICE", "cuda")
    settings = Settings(storage_dir=tmp_path)
    assert settings.device == "cuda"
    with pytest.raises(click.UsageError, match="no CUDA GPU.*PFLKIT_EVALUATOR_DEVICE"):
        check_device(settings)
    check_device(Settings(storage_dir=tmp_path, device="cpu"))


def test_scorer_runs_on_the_configured_device(tmp_path: Path, tiny_reference: Path) -> None:
    data = write_benchmark(tmp_path / "benchmark", questions=6)
    checkpoint = tiny_reference / "model.safetensors"
    on_cpu = Scorer(data, reference_model=str(tiny_reference), device="cpu",
                    cache_root=tmp_path / "cpu")  # fmt: skip
    on_cpu.prepare()
    assert on_cpu.device == torch.device("cpu")
    default = Scorer(data, reference_model=str(tiny_reference), cache_root=tmp_path / "auto")
    first, second = on_cpu.score(checkpoint), default.score(checkpoint)
    assert first.n == second.n == 6
    assert (first.anls, first.accuracy) == (second.anls, second.accuracy)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA GPU"):
            Scorer(data, reference_model=str(tiny_reference), device="cuda:0").prepare()
