"""A real-size dress rehearsal on the CPU: a VT5-base checkpoint through one LoRA round, uploaded
to the evaluator and scored (slow: `make test-slow`; 10 to 20 minutes and about 8 GB of memory
on 2 cores).

Every step is the command a participant or an organiser types, each in a process of its own:
`pflkit model init --shape vt5-base` (random weights, the shipped tokenizer, no hub), `pflkit
train --preset lora` for one round of 2 of the 10 clients of a generated `tiny` benchmark (one
local epoch over their questions, 2 a step: the preset's 16 a step takes over 20 GB on the CPU), `pflkit serve --no-worker` and `pflkit worker` on localhost
(SQLite, its file queue) with the same checkpoint as the organisers' reference, `pflkit team
create`, then `pflkit submit --wait` of the run's 1.3 GB checkpoint, scored on the 46 questions
of the test split. Checked: the submission is finished with a score of every test question, the
bytes of the run's communication log, and the upload streamed (the API process's peak resident
memory stays under half the checkpoint's size). Each process's peak resident memory is printed
(`-s`) and recorded in docs/results/memory.md.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.evaluator.service import Process, Service, create_team, service_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

MIB = 1024 * 1024
#: the test questions of `pflkit data generate --scale tiny --seed 0`
TEST_QUESTIONS = 46


def _run(args: list[str], env: dict[str, str], timeout: float) -> tuple[str, float, float]:
    """Run ``pflkit ARGS``; its standard output, peak resident memory (MiB, ``ru_maxrss`` of
    ``os.wait4``) and seconds.

    Raises:
        AssertionError: when the command fails or outlives ``timeout`` (with its output's end).
    """
    started = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "pflkit", *args], stdout=out, stderr=err,
            env={**os.environ, **env},
        )  # fmt: skip
        while (reaped := os.wait4(process.pid, os.WNOHANG))[0] == 0:
            if time.monotonic() - started > timeout:
                process.kill()
                os.wait4(process.pid, 0)
                raise AssertionError(f"pflkit {' '.join(args)} took over {timeout} s")
            time.sleep(0.5)
        _, status, usage = reaped
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        assert process.returncode == 0, (
            f"pflkit {' '.join(args)} failed: {err.read().decode(errors='replace')[-3000:]}"
        )
        return out.read().decode(), usage.ru_maxrss / 1024, time.monotonic() - started


def _peak_of(process: Process) -> float:
    """A running process's peak resident memory (``VmHWM``), in MiB."""
    for line in Path(f"/proc/{process.process.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def _logged_bytes(run: Path) -> int:
    """Total bytes of a run's communication log (competition format: one row per message)."""
    with (run / "communication_log.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    column = next(name for name in rows[0] if "byte" in name.lower())
    return sum(int(row[column]) for row in rows)


def test_a_real_size_lora_round_is_submitted_and_scored(tmp_path: Path) -> None:
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "PFLKIT_CACHE_DIR": str(tmp_path / "cache")}  # fmt: skip
    data, base, run = tmp_path / "data", tmp_path / "vt5-base", tmp_path / "run"
    figures: dict[str, float] = {}
    _run(["data", "generate", "--scale", "tiny", "--seed", "0", "--out", str(data)], env, 600)
    _run(["model", "init", "--shape", "vt5-base", "--out", str(base)], env, 900)
    checkpoint_mib = (base / "model.safetensors").stat().st_size / MIB
    _, figures["train"], seconds = _run(
        ["train", "--preset", "lora", "--base", str(base), "--data", str(data), "--out", str(run),
         "--rounds", "1", "--clients-per-round", "2", "--local-epochs", "1", "--batch-size", "2",
         "--val-limit", "0", "--threads", "2"],
        env, 2400,
    )  # fmt: skip
    figures["train_seconds"] = seconds
    uploaded = run / "checkpoint" / "model.safetensors"
    assert uploaded.stat().st_size > 1000 * MIB  # the real-size model travels whole

    database_url = f"sqlite:///{tmp_path / 'evaluator.db'}"
    service_environment = {
        **service_env(tmp_path, reference=base, data=data, database_url=database_url),
        **env, "PFLKIT_EVALUATOR_BATCH_SIZE": "32", "PFLKIT_EVALUATOR_TORCH_THREADS": "0",
        "PFLKIT_EVALUATOR_LEASE_SECONDS": "600",
    }  # fmt: skip
    token = create_team(database_url, "rehearsal")
    service = Service(tmp_path / "serve.log", service_environment, "--no-worker")
    worker = Process(["worker"], tmp_path / "worker.log", service_environment)
    try:
        service.wait_healthy()
        out, figures["submit"], seconds = _run(
            ["submit", str(run), "--server", service.url, "--token", token, "--wait",
             "--timeout", "1800", "--json"],
            env, 2400,
        )  # fmt: skip
        figures["submit_and_score_seconds"] = seconds
        figures["api"], figures["worker"] = _peak_of(service), _peak_of(worker)
    finally:
        logs = service.output() + worker.output()
        service.stop()
        worker.stop()
    result = json.loads(out)
    print(json.dumps({"checkpoint_mib": round(checkpoint_mib), "uploaded_mib":
                      round(uploaded.stat().st_size / MIB),
                      **{k: round(v, 1) for k, v in figures.items()}}))  # fmt: skip
    assert result["status"] == "finished", (result, logs[-3000:])
    assert result["results"]["n_questions"] == TEST_QUESTIONS
    assert 0.0 <= result["anls"] <= 1.0 and 0.0 <= result["accuracy"] <= 1.0
    assert result["total_bytes"] == _logged_bytes(run)
    # The upload streams to disk: the API never holds the checkpoint.
    assert figures["api"] < 0.5 * checkpoint_mib, figures
