"""The federation on Flower's deployment engine reproduces the in-process run.

A real SuperLink and three SuperNodes run as separate processes on 127.0.0.1 from
``.venv-flower`` (``make flower-setup``), started by ``pflkit flower superlink|supernode`` with a
temporary ``FLWR_HOME``; ``pflkit train --engine flower`` runs the kit's Flower app on them. The
nodes hold clients 0-3, 4-6 and 7-9 of the `tiny` benchmark and read only their own clients'
files. The communication log, the metrics, the privacy declaration and the global weights must
be the in-process engine's for the same seed, and every message's Flower bytes are measured.
The `lora-nf4` runs (VT5, and Pix2Struct: another model family) are in `make test-flower` (and
so in CI); the others are in `make test-slow`.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from baselines.flower.local import LocalFederation
from baselines.presets import preset_config
from tests.baselines.flower_runs import (
    FLOWER_BIN,
    assert_same_run,
    run_in_process,
    skip_without_flower,
)

NODE_CLIENTS = ("0-3", "4-6", "7-9")

skip_without_flower()


@pytest.fixture
def federation(tmp_path: Path, tiny_data: Path) -> Iterator[LocalFederation]:
    with LocalFederation(root=tmp_path / "federation", bin_dir=FLOWER_BIN, data=tiny_data) as running:
        running.start(NODE_CLIENTS)
        yield running


@pytest.fixture(scope="module")
def pix2struct_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random tiny Pix2Struct (`pflkit model init --family pix2struct --shape tiny`)."""
    from benchmark.model.random_init import init_checkpoint

    return init_checkpoint("tiny", tmp_path_factory.mktemp("p2s") / "base", family="pix2struct")


@pytest.mark.parametrize(
    ("preset", "flags", "options", "family"),
    [pytest.param("lora-nf4", ["--rounds", "2", "--local-epochs", "1"],
                  {"rounds": 2, "local_epochs": 1}, "vt5", marks=pytest.mark.flower,
                  id="lora-nf4"),
     pytest.param("lora-nf4", ["--rounds", "1", "--local-epochs", "1"],
                  {"rounds": 1, "local_epochs": 1}, "pix2struct", marks=pytest.mark.flower,
                  id="lora-nf4-pix2struct"),
     pytest.param("dp-lora", ["--rounds", "1", "--epsilon", "4"], {"rounds": 1, "epsilon": 4.0},
                  "vt5", marks=pytest.mark.slow, id="dp-lora")],
)
def test_deployment_reproduces_the_in_process_run(preset, flags, options, family,
                                                  federation: LocalFederation, tiny_data: Path,
                                                  request: pytest.FixtureRequest,
                                                  tmp_path: Path) -> None:
    tiny_base = request.getfixturevalue("tiny_base" if family == "vt5" else f"{family}_base")
    flower, in_process = tmp_path / "flower", tmp_path / "in-process"
    done = federation.train(flower, "--preset", preset, "--base", str(tiny_base),
                            "--val-limit", "0", "--threads", "1", *flags, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((flower / "flower_summary.json").read_text())
    assert done.stdout.rstrip().endswith(json.dumps(summary, indent=2))
    assert summary["engine"] == "flower" and summary["rounds"] == options["rounds"]
    run_in_process(preset, options, tiny_data, tiny_base, in_process)

    assert_same_run(flower, in_process)
    assert (json.loads((flower / "submission.json").read_text())["total_bytes"]
            == json.loads((in_process / "submission.json").read_text())["total_bytes"])
    log = [json.loads(line) for line in (flower / "communication_log.jsonl").read_text().splitlines()]
    framing = [json.loads(line) for line in (flower / "flower_messages.jsonl").read_text().splitlines()]
    assert len(log) == len(framing) == 2 * preset_config(preset, **options).clients_per_round * options["rounds"]
    sent = sorted((r["federated_round"], r["sender"], r["receiver"], r["serialized_bytes"]) for r in log)
    assert sorted((r["federated_round"], r["sender"], r["receiver"], r["payload_bytes"])
                  for r in framing) == sent
    assert all(0 < r["framing_bytes"] < 4096 for r in framing), framing
    assert not (flower / "flower_faults.jsonl").exists()


def _node_of(client: int) -> str:
    """The NODE_CLIENTS entry holding ``client``."""
    for clients in NODE_CLIENTS:
        low, _, high = clients.partition("-")
        if int(low) <= client <= int(high or low):
            return clients
    raise ValueError(client)


def _wait_for(path: Path, lines: int, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().splitlines()) >= lines:
            return
        time.sleep(0.05)
    raise TimeoutError(f"{path} has fewer than {lines} lines after {timeout} s")


@pytest.mark.slow
def test_a_node_dying_mid_round_stops_the_run_and_resume_finishes_it(
        federation: LocalFederation, tiny_data: Path, tiny_base: Path, tmp_path: Path) -> None:
    """Policy `fail`: the crash is reported, the run keeps round 1; resumed, it ends as in-process."""
    flower, in_process = tmp_path / "flower", tmp_path / "in-process"
    options = {"rounds": 2, "local_epochs": 2, "clients_per_round": 3}
    config = preset_config("lora-nf4", val_limit=0, **options)
    flags = ["--preset", "lora-nf4", "--base", str(tiny_base), "--val-limit", "0",
             "--threads", "1", "--rounds", "2", "--local-epochs", "2", "--clients-per-round", "3"]
    with subprocess.Popen(
            [str(FLOWER_BIN / "pflkit"), "train", "--engine", "flower", "--federation",
             "local-deployment", "--data", str(tiny_data), "--out", str(flower), "--no-progress",
             *flags], env=federation.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True) as run:
        # round 2's three broadcasts are sent (round 1 is committed): crash a sampled client's node
        _wait_for(flower / "flower_messages.jsonl", 6 + 3)
        victim = _node_of(config.build_strategy().configure_fit(2, 10, seed=config.seed)[0])
        federation.kill_node(victim)
        output, _ = run.communicate(timeout=600)
    assert run.returncode != 0
    assert "continue with --resume" in output, output[-3000:]
    faults = [json.loads(line) for line in (flower / "flower_faults.jsonl").read_text().splitlines()]
    assert faults and faults[0]["federated_round"] == 2 and faults[0]["policy"] == "fail"
    assert "left the federation" in faults[0]["reason"] or "error" in faults[0]["reason"]
    assert json.loads((flower / "state" / "latest.json").read_text())["round"] == 1

    federation.start_node(victim)
    done = federation.train(flower, *flags, "--resume")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run_in_process("lora-nf4", options, tiny_data, tiny_base, in_process)
    assert_same_run(flower, in_process)
