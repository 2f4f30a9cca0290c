"""`--device` and `--precision`: resolution, clear errors, and answers kept on the CPU."""

from __future__ import annotations

import json

import pytest
import torch
from click.testing import CliRunner

from benchmark.data import load_split
from benchmark.evaluation import predict
from benchmark.model import load_model, load_processor
from benchmark.model.device import autocast, resolve_device


def test_auto_is_cuda_when_present_else_cpu():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    assert resolve_device(None).type == expected
    assert resolve_device("cpu") == torch.device("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without GPU")
def test_cuda_without_a_gpu_is_a_clear_error():
    with pytest.raises(ValueError, match="torch sees no CUDA GPU on this machine"):
        resolve_device("cuda")


@pytest.mark.parametrize("name", ["gpu7", "mps", "cuda:x"])
def test_unknown_devices_are_refused(name):
    with pytest.raises(ValueError, match=f"--device {name}"):
        resolve_device(name)


def test_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="precision 'fp8'"):
        with autocast(torch.device("cpu"), "fp8"):
            pass


def test_the_base_answers_the_same_on_cpu_and_mostly_the_same_in_bf16(tiny_data):
    model, processor = load_model("base"), load_processor("base")
    dataset = load_split(tiny_data, "val")
    default = predict(model, processor, dataset, progress=False)
    on_cpu = predict(model.to(resolve_device("cpu")), processor, dataset, progress=False)
    assert on_cpu == default
    bf16 = predict(model, processor, dataset, progress=False, precision="bf16")
    same = sum(a == b for a, b in zip(default, bf16, strict=True))
    assert same >= 0.85 * len(default), f"bf16 kept {same} of {len(default)} answers"


def test_evaluate_command_takes_device_and_precision(tiny_data):
    from pflkit.cli import main

    runner = CliRunner()
    result = runner.invoke(main, ["evaluate", "base", "--data", str(tiny_data), "--limit", "8",
                                  "--device", "cpu", "--json"])
    assert result.exit_code == 0, result.output
    summary = result.output[result.output.index('{"checkpoint"'):].splitlines()[0]
    assert json.loads(summary)["n"] == 8
    result = runner.invoke(main, ["evaluate", "base", "--data", str(tiny_data), "--device",
                                  "tpu"])
    assert result.exit_code == 2 and "--device tpu" in result.output
