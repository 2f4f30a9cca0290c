"""The GPU check's CPU rehearsal: every step of ``bench/gpu_check.sh`` runs end to end here.

The same script runs on a lent GPU with the real shape; here it runs with ``DEVICE=cpu`` and the
tiny shape, one preset in the tests step and three training steps, so that nothing in it is
first run on the GPU. The official side needs the official environment (``make gpu-wheels``
and a Python that can use its wheels); without it those comparisons say they were skipped,
which the check's JSON must show rather than hide. With ``PFLKIT_OFFICIAL_PYTHON`` (a Python
with transformers 4.27 and the official code's needs) and ``.gpu/official-code``, they run.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STEPS = ("environment", "prepare", "tests", "real_size_steps", "train_throughput",
         "scoring_throughput", "memory_24gb", "round")  # fmt: skip


#: the whole check on the CPU takes about 110 s: `make test-slow` (the suite stays under 15 min)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("gpucheck")
    env = {
        **os.environ,
        "DEVICE": "cpu",
        "SHAPE": "tiny",
        "GPU_PYTHON": sys.executable,
        "GPU_CHECK_WORK": str(out / "work"),
        "GPU_CHECK_ARGS": "--test-presets fedavg --train-steps 3 --round-val 4",
    }
    official = os.environ.get("PFLKIT_OFFICIAL_PYTHON")
    if official:
        env["GPU_OFFICIAL_PYTHON"] = official
    completed = subprocess.run(["bash", str(ROOT / "bench" / "gpu_check.sh"), str(out / "result")],
                               env=env, cwd=ROOT, capture_output=True, text=True, timeout=400,
                               check=False)  # fmt: skip
    assert completed.returncode == 0, completed.stdout[-4000:] + completed.stderr[-4000:]
    return out / "result", json.loads((out / "result" / "gpucheck.json").read_text())


def test_every_step_runs_on_the_cpu_and_the_results_are_bundled(rehearsal) -> None:
    result, summary = rehearsal
    assert summary["device"] == "cpu" and list(summary["steps"]) == list(STEPS)
    assert {name: entry["status"] for name, entry in summary["steps"].items()} == dict.fromkeys(
        STEPS, "ok"
    )
    with tarfile.open(result / "gpucheck.tar.gz") as bundle:
        names = {Path(name).name for name in bundle.getnames()}
    assert {"gpucheck.json", *(f"{step}.log" for step in STEPS)} <= names


def test_the_steps_measure_what_they_say(rehearsal) -> None:
    _, summary = rehearsal
    steps = {name: entry["result"] for name, entry in summary["steps"].items()}
    tests = steps["tests"]
    assert tests["exit_code"] == 0 and tests["passed"] >= 3 and not tests["failed"]
    assert steps["real_size_steps"]["finite"]
    train = steps["train_throughput"]
    for precision in ("fp32", "bf16"):
        kit = train["kit"][precision]
        assert len(kit["losses"]) == 3 and all(math.isfinite(v) for v in kit["losses"])
        assert kit["examples_per_second"] > 0
    assert [row["preset"] for row in train["other_presets"]] == ["lora-qv-r6"] * 2 + ["dp-lora"]
    scoring = steps["scoring_throughput"]
    assert [row["precision"] for row in scoring["kit"]] == ["fp32", "bf16"]
    assert all(row["questions"] > 0 for row in scoring["kit"])
    memory = steps["memory_24gb"]["rows"]
    assert [row["setting"] for row in memory] == ["fp32", "bf16", "fp32+gc", "fp32+8bit",
                                                  "bf16+gc+8bit"]  # fmt: skip
    assert all(row["peak_memory_bytes"] > 0 for row in memory)
    rounds = steps["round"]["rows"]
    assert [row["preset"] for row in rounds] == ["fedavg", "dp-lora-competition"]
    for row in rounds:
        parts = row["client_training_seconds"] + row["evaluation_seconds"]
        assert row["round_seconds"] >= parts - 0.01 and row["round_bytes"] > 0


def test_the_official_side_runs_or_says_why_not(rehearsal) -> None:
    _, summary = rehearsal
    train = summary["steps"]["train_throughput"]["result"]
    scoring = summary["steps"]["scoring_throughput"]["result"]
    if not os.environ.get("PFLKIT_OFFICIAL_PYTHON"):
        assert "skipped" in train["official"] or "failed" in train["official"]
        assert "skipped" in scoring["official"] or "failed" in scoring["official"]
        pytest.skip("no official environment (PFLKIT_OFFICIAL_PYTHON): its side was skipped")
    assert train["official"]["transformers"] == "4.27.2"
    first = train["losses"][0]
    assert first["official"] == pytest.approx(first["kit_fp32"], rel=1e-3)
    kit_fp32 = scoring["kit"][0]
    assert kit_fp32["answers_equal_to_official"] == scoring["official"]["questions"]
