"""A real-size round on Flower's deployment engine: VT5-base `fedavg`, 1 GB messages each way.

A FedAvg message of VT5-base carries its 250,333,440 trained values in fp32, about 1 GB: past
gRPC's default message limits, so this is where a real participant's first round on Flower
would break. A SuperLink and two SuperNodes run on 127.0.0.1 from ``.venv-flower``
(``make flower-setup``); ``pflkit model init --shape vt5-base`` writes the random real-shape
model (no hub); one round of `fedavg` trains 2 of the 10 clients of the `tiny` benchmark (one
local epoch, 2 questions a step), both held by one SuperNode (:data:`NODE_CLIENTS`). The run's
log, metrics and global weights must be the in-process engine's for the same seed, and each
process's peak resident memory (``VmHWM``, sampled every 0.2 s) is printed (``-s``); with
``PFLKIT_RECORD_RESULTS=1`` the figures are written to docs/results/data/flower_real_size.json,
the table of docs/results/flower.md.

Slow (`make test-slow`): 12 minutes and about 16 GB of memory on 2 cores (2026-11-27).
"""

from __future__ import annotations

import csv
import os
import threading
import time
from pathlib import Path

import pytest
import torch

from baselines.flower.local import LocalFederation, descendants
from tests.baselines.flower_runs import (
    FLOWER_BIN,
    assert_same_run,
    run_in_process,
    skip_without_flower,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

skip_without_flower()

#: the values `fedavg` sends of VT5-base (tests/baselines/test_real_size.py), 4 bytes each.
FEDAVG_MESSAGE_BYTES = 4 * 250_333_440
#: Seed 0 samples clients 4 and 8 in round 1: both on the second SuperNode, which trains them
#: one after the other and answers with both updates in one 2 GB message. A SuperNode a client
#: (both training at once) needs two ClientApps of about 9 GB each (the model, AdamW's state,
#: the broadcast and the update), more than a 24 GB machine holds beside the ServerApp.
NODE_CLIENTS = ("0-3", "4-9")
OPTIONS = {"rounds": 1, "clients_per_round": 2, "local_epochs": 1, "batch_size": 2}
MIB = 1024 * 1024


class PeakMemory:
    """The peak resident memory (``VmHWM``) of every process under this one, by role, read from
    ``/proc`` every 0.2 s until :meth:`stop` (a process that lives under 0.2 s may be missed)."""

    def __init__(self) -> None:
        self.peaks: dict[str, int] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._done.wait(0.2):
            for pid in descendants(os.getpid()):
                role, peak = _role(pid), _peak_bytes(pid)
                if role and peak:
                    self.peaks[role] = max(self.peaks.get(role, 0), peak)

    def stop(self) -> dict[str, int]:
        """Stop sampling; the peak bytes of each role."""
        self._done.set()
        self._thread.join()
        return dict(self.peaks)


def _role(pid: int) -> str:
    """What a process is, from its command line (``""`` when it has gone or is not ours)."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return ""
    text = " ".join(arg.decode(errors="replace") for arg in args)
    for marker, role in (("flower-superlink", "SuperLink"),
                         ('clients="0,1,2,3"', "SuperNode 0-3"),
                         ('clients="4,5,6,7,8,9"', "SuperNode 4-9"),
                         ("flwr-serverapp", "ServerApp"), ("flwr-clientapp", "ClientApp"),
                         ("pflkit train", "pflkit train")):
        if marker in text:
            return role
    return ""


def _peak_bytes(pid: int) -> int:
    """``VmHWM`` of a process, in bytes (0 when it has gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def test_a_vt5_base_fedavg_round_on_the_deployment_engine_equals_the_in_process_run(
        tiny_data: Path, tmp_path: Path) -> None:
    from benchmark.model.random_init import init_checkpoint

    base = init_checkpoint("vt5-base", tmp_path / "vt5-base")
    flower, in_process = tmp_path / "flower", tmp_path / "in-process"
    flags = ["--preset", "fedavg", "--base", str(base), "--val-limit", "0", "--threads", "1",
             "--rounds", "1", "--clients-per-round", "2", "--local-epochs", "1",
             "--batch-size", "2"]
    started = time.monotonic()
    with LocalFederation(root=tmp_path / "federation", bin_dir=FLOWER_BIN, data=tiny_data) as running:
        running.start(NODE_CLIENTS)
        memory = PeakMemory()
        done = running.train(flower, *flags, timeout=3000)
        peaks = memory.stop()
    flower_seconds = time.monotonic() - started
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    torch.set_num_threads(1)
    started = time.monotonic()
    run_in_process("fedavg", OPTIONS, tiny_data, base, in_process)
    in_process_seconds = time.monotonic() - started

    with (flower / "communication_log.csv").open() as stream:
        rows = list(csv.DictReader(stream))
    assert len(rows) == 4
    assert {int(row["amount_of_bytes"]) for row in rows} == {FEDAVG_MESSAGE_BYTES}
    assert_same_run(flower, in_process)

    print(f"\nVT5-base fedavg, 1 round of 2 clients: Flower deployment {flower_seconds:.0f} s "
          f"(SuperLink, 2 SuperNodes, start to stop), in-process {in_process_seconds:.0f} s; "
          f"messages {FEDAVG_MESSAGE_BYTES:,} bytes each; checkpoint "
          f"{(base / 'model.safetensors').stat().st_size / MIB:,.0f} MiB")
    for role, peak in sorted(peaks.items()):
        print(f"peak resident memory, {role}: {peak / MIB:,.0f} MiB")
    if os.environ.get("PFLKIT_RECORD_RESULTS") == "1":
        _record(peaks, flower_seconds, in_process_seconds)


def _record(peaks: dict[str, int], flower_seconds: float, in_process_seconds: float) -> None:
    """The figures as docs/results/data/flower_real_size.json (one row a process)."""
    from experiments.results_file import Column, write_results_table

    rows = [{"what": f"peak resident memory, {role}", "value": round(peak / MIB)}
            for role, peak in sorted(peaks.items())]
    rows += [{"what": "seconds, Flower deployment (start to stop)", "value": round(flower_seconds)},
             {"what": "seconds, in-process engine", "value": round(in_process_seconds)},
             {"what": "bytes of each message (fp32, 4 of them)", "value": FEDAVG_MESSAGE_BYTES}]
    write_results_table(
        Path(__file__).resolve().parents[2] / "docs/results/data/flower_real_size.json",
        (Column("what", "measured", align="left"), Column("value", "MiB, seconds or bytes",
                                                          format="int")),
        rows,
        command="PFLKIT_RECORD_RESULTS=1 pytest -s -m slow tests/baselines/test_flower_real_size.py",
    )
