"""The same run on the kit's in-process engine, Flower's deployment engine and Flower's simulation.

Runs one configuration three times from Flower's environment (``make flower-setup``):

- in process: ``pflkit train`` (the default engine);
- deployment: a SuperLink and SuperNodes on 127.0.0.1 as separate processes
  (:class:`baselines.flower.local.LocalFederation`), ``pflkit train --engine flower``;
- simulation: ``pflkit train --engine flower-simulation``: the same app on Flower's simulation
  engine (a SuperLink started with ``--simulation`` runs one ``ClientApp`` per client on Ray).

It prints, per engine: the command's wall time end to end, the round loop's wall time and its
client-training time (as the run directory records them), whether the communication log equals
the in-process one, the largest difference of the final global weights, and Flower's bytes per
message beside the payload (``RUN_DIR/flower_messages.jsonl``), the machine's 1-minute load average
when each engine started and ended (the seconds are only comparable under the same load), and the
ratios of each Flower engine's loop and command time to the in-process engine's.

Usage: ``.venv-flower/bin/python -m bench.flowerbench --data DIR --out DIR [--preset P]
[--nodes 0-3,4-6,7-9] [--record PATH] [train options after --]``.

``--record PATH`` adds the run to that results table's data file
(``docs/results/data/flower_mini.json``, :data:`TABLE_COLUMNS`): one row per engine, the first
numbered after the table's earlier runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from baselines.flower.local import LocalFederation
from experiments.results_file import (
    Column,
    append_results_rows,
    command_line,
    matching_table,
    number,
    text,
)


def _global(run: Path) -> dict[str, torch.Tensor]:
    latest = json.loads((run / "state" / "latest.json").read_text())
    return load_file(run / "state" / latest["dir"] / "global.safetensors")


def _summary(run: Path, seconds: float, reference: Path | None) -> dict[str, Any]:
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    row: dict[str, Any] = {
        "command_seconds": round(seconds, 1),
        "loop_wall_seconds": round(metrics[-1]["wall_seconds"], 1),
        "client_training_seconds": round(metrics[-1]["client_training_seconds"], 1),
    }
    row["loop_wall_over_training"] = round(
        row["loop_wall_seconds"] / max(row["client_training_seconds"], 1e-9), 2)
    messages = run / "flower_messages.jsonl"
    if messages.exists():
        rows = [json.loads(line) for line in messages.read_text().splitlines()]
        down = [r["framing_bytes"] for r in rows if r["sender"] == -1]
        up = [r["framing_bytes"] for r in rows if r["sender"] != -1]
        row["framing_bytes_down"] = statistics.median(down)
        row["framing_bytes_up"] = statistics.median(up)
        row["payload_bytes"] = rows[0]["payload_bytes"]
        row["node_setup_seconds"] = round(sum(r.get("setup_seconds", 0.0) for r in rows), 1)
    if reference is not None:
        row["log_equal"] = ((run / "communication_log.jsonl").read_text()
                            == (reference / "communication_log.jsonl").read_text())
        first, second = _global(reference), _global(run)
        row["max_weight_difference"] = max(
            float((first[name] - second[name]).abs().max()) for name in first)
    return row


#: each engine's name in the results table
ENGINE_TITLES = {"in-process": "in process", "deployment": "Flower deployment",
                 "simulation": "Flower simulation (Ray)"}  # fmt: skip
#: The results table's columns (``docs/results/data/flower_mini.json``): per engine, the load
#: average at its start and end, the command's, the loop's and the clients' training seconds,
#: and how the run compares with the in-process one.
TABLE_COLUMNS: tuple[Column, ...] = (
    Column("run", "run", "left", "int"),
    text("engine", "engine"),
    text("load_average", "load average"),
    text("command", "command", align="right"),
    text("loop", "loop", align="right"),
    text("client_training", "client training", align="right"),
    number("loop_training", "loop / training", ".2f"),
    text("log_equal", "log equal"),
    number("largest_weight_difference", "largest weight difference", ".1f"),
)


def next_run_number(path: Path) -> int:
    """One more than the largest run number of the table at ``path`` (1 for a new table)."""
    earlier = matching_table(path, TABLE_COLUMNS)
    numbers = [row["run"] for row in earlier["rows"] if isinstance(row["run"], int)] if earlier else []
    return max(numbers, default=0) + 1


def table_rows(results: dict[str, dict[str, Any]], run: int) -> list[dict[str, Any]]:
    """The results table's rows of one run (engine -> :func:`_summary` with its
    ``load_average``), the first numbered ``run``."""
    rows = []
    for engine, summary in results.items():
        start, end = summary["load_average"]
        equal = summary.get("log_equal")
        rows.append({
            "run": "" if rows else run, "engine": ENGINE_TITLES[engine],
            "load_average": f"{start:.1f} to {end:.1f}",
            "command": f"{summary['command_seconds']:.1f} s",
            "loop": f"{summary['loop_wall_seconds']:.1f} s",
            "client_training": f"{summary['client_training_seconds']:.1f} s",
            "loop_training": summary["loop_wall_over_training"],
            "log_equal": ("(reference)" if engine == "in-process" else
                          "" if equal is None else "yes" if equal else "no"),
            "largest_weight_difference": summary.get("max_weight_difference", ""),
        })  # fmt: skip
    return rows


def _timed_train(federation: LocalFederation, run: Path, args: argparse.Namespace,
                 extra: list[str]) -> float:  # fmt: skip
    """Train the preset on the started federation; its wall seconds (the run's output on failure)."""
    tic = time.perf_counter()
    done = federation.train(run, "--preset", args.preset, "--base", args.base, "--threads", "1",
                            *extra)  # fmt: skip
    seconds = time.perf_counter() - tic
    if done.returncode != 0:
        raise SystemExit(done.stdout[-3000:] + done.stderr[-3000:])
    return seconds

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--preset", default="lora-nf4")
    parser.add_argument("--base", default="base")
    parser.add_argument("--nodes", default="0-3,4-6,7-9",
                        help="SuperNode client groups, separated by ';' (or by ',' when each "
                             "group is one id or one range, as 0-3,4-6,7-9).")
    parser.add_argument("--engines", default="in-process,deployment,simulation")
    parser.add_argument("--record", type=Path, default=None,
                        help="add the run's engines as rows of this results table's data file "
                             "(docs/results/data/NAME.json, shown by a results page)")
    parser.add_argument("train_options", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    extra = [o for o in args.train_options if o != "--"]
    pflkit = str(Path(sys.executable).parent / "pflkit")
    common = ["--preset", args.preset, "--base", args.base, "--data", str(args.data),
              "--no-progress", "--threads", "1", *extra]
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict[str, Any]] = {}
    engines = args.engines.split(",")
    reference = args.out / "in-process"
    if "in-process" in engines:
        shutil.rmtree(reference, ignore_errors=True)
        load = os.getloadavg()[0]
        tic = time.perf_counter()
        subprocess.run([pflkit, "train", *common, "--out", str(reference)], check=True,
                       stdout=subprocess.DEVNULL)
        results["in-process"] = _summary(reference, time.perf_counter() - tic, None)
        results["in-process"]["load_average"] = [load, os.getloadavg()[0]]
        print(json.dumps({"in-process": results["in-process"]}), flush=True)
    reference_or_none = reference if reference.exists() else None
    if "deployment" in engines:
        run = args.out / "deployment"
        shutil.rmtree(run, ignore_errors=True)
        groups = args.nodes.split(";") if ";" in args.nodes else args.nodes.split(",")
        load = os.getloadavg()[0]
        with LocalFederation(root=args.out / "federation", bin_dir=Path(sys.executable).parent,
                             data=args.data) as federation:
            federation.start(tuple(groups))
            seconds = _timed_train(federation, run, args, extra)
        results["deployment"] = _summary(run, seconds, reference_or_none)
        results["deployment"]["load_average"] = [load, os.getloadavg()[0]]
        print(json.dumps({"deployment": results["deployment"]}), flush=True)
    if "simulation" in engines:
        run = args.out / "simulation"
        shutil.rmtree(run, ignore_errors=True)
        load = os.getloadavg()[0]
        with LocalFederation(root=args.out / "simulation-link", bin_dir=Path(sys.executable).parent,
                             data=args.data) as federation:
            federation.start(simulation=True)
            seconds = _timed_train(federation, run, args, extra)
        if not (run / "flower_summary.json").exists():
            raise SystemExit("the simulation ended without a summary")
        results["simulation"] = _summary(run, seconds, reference_or_none)
        results["simulation"]["load_average"] = [load, os.getloadavg()[0]]
        print(json.dumps({"simulation": results["simulation"]}), flush=True)
    ratios = {}
    if "in-process" in results:
        for engine in ("deployment", "simulation"):
            if engine in results:
                ratios[f"{engine}_over_in_process"] = {
                    key: round(results[engine][key] / results["in-process"][key], 2)
                    for key in ("loop_wall_seconds", "command_seconds")}
    print(json.dumps({"preset": args.preset, "options": extra, "torch_threads": 1,
                      "omp": os.environ.get("OMP_NUM_THREADS"), **results, **ratios}, indent=2))
    if args.record is not None:
        rows = table_rows(results, next_run_number(args.record))
        command = command_line("bench.flowerbench", sys.argv[1:])
        print(append_results_rows(args.record, TABLE_COLUMNS, rows, command=command))


if __name__ == "__main__":
    main()
