"""Time of a DP round at the competition's federation size against a non-private round.

One round of a competition DP preset (``dp-fedavg-competition`` or ``dp-lora-competition``) on
two clients of a ``dp``-scale benchmark, m providers sampled per client (Poisson at m / 400),
computed three ways on the same sampled rows and starting weights:

- ``reference``: the original per-provider loop (every update kept, clipped and summed after);
- ``streamed``: the same loop with each update clipped and added in reused buffers;
- ``non-private``: one local training run per client on all the sampled rows together
  (batches of the run's batch size), what FedAvg would do with the same examples.

It prints seconds per round for each, their ratios, and a cProfile breakdown of the reference
DP round (reset, data selection and collation, forward, backward, optimiser construction and
step, delta, clipping and summing). Timings are printed, not asserted; run it nice'd on a
shared machine and note the load average it prints.

Usage: ``python -m bench.dpbench --data DIR [--preset dp-fedavg-competition] [--providers 50]``.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import os
import pstats
import time
from collections.abc import Callable
from typing import Any

#: profile rows: label -> (callee, caller) pairs of ``file:function``; a caller ``""`` is any.
#: Each pair counts the callee's cumulative time when called from that caller, so nested module
#: calls are not counted twice.
PHASES: dict[str, tuple[tuple[str, str], ...]] = {
    "reset (load start weights)": (("client_job.py:reset", ""),),
    "delta (copy out the update)": (("client_job.py:delta", ""),),
    "clip and sum": (("mechanism.py:sum_clipped", ""), ("clipped_sum.py:add", "")),
    "rows: select, iterate, collate": (
        ("arrow_dataset.py:select", ""),
        ("arrow_dataset.py:__iter__", "local_training.py:train"),
        ("document_task.py:collate", "local_training.py:train"),
    ),
    "forward": (("module.py:_wrapped_call_impl", "local_training.py:train"),),
    "backward": (("_tensor.py:backward", "local_training.py:train"),),
    "optimiser construction": (("adamw.py:__call__", "local_training.py:train"),),
    "optimiser step": (("optimizer.py:wrapper", "local_training.py:train"),),
}


def _key(entry: tuple[str, int, str]) -> str:
    """``file:function`` of a pstats entry."""
    return f"{os.path.basename(entry[0])}:{entry[2]}"


def _profile_phases(call: Callable[[], Any]) -> tuple[float, dict[str, float]]:
    """Run ``call`` under cProfile; wall seconds and cumulative seconds of each phase."""
    profiler = cProfile.Profile()
    tic = time.perf_counter()
    profiler.runcall(call)
    wall = time.perf_counter() - tic
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    phases = dict.fromkeys(PHASES, 0.0)
    for entry, (_, _, _, cumulative, callers) in stats.items():
        for label, pairs in PHASES.items():
            for callee, caller in pairs:
                if _key(entry) != callee:
                    continue
                if not caller:
                    phases[label] += cumulative
                else:
                    phases[label] += sum(v[3] for c, v in callers.items() if _key(c) == caller)
    return wall, phases


def main() -> None:
    """Build two clients of the benchmark, time the three rounds and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="a dp-scale benchmark (participant/)")
    parser.add_argument("--base", default="base")
    parser.add_argument("--preset", default="dp-fedavg-competition")
    parser.add_argument("--providers", type=int, default=50, help="m per client")
    parser.add_argument("--clients", default="0,1")
    args = parser.parse_args()

    import torch

    from baselines.core.parameters import get_values
    from baselines.engine.client import FederatedClient
    from baselines.engine.document_task import build_task
    from baselines.presets import preset_config
    from baselines.privacy.plan import make_plan
    from benchmark.data.reader import find_split

    print(f"load average before: {os.getloadavg()}; torch threads {torch.get_num_threads()}")
    clients = [int(k) for k in args.clients.split(",")]
    data = find_split(args.data, "val").parent
    task = build_task(data, args.base, val_limit=0, progress=False, clients=clients)
    config = preset_config(args.preset, epsilon=8.0, providers_per_round=args.providers)
    method = config.build_method()
    method.plan = make_plan(
        method.options,
        rounds=config.rounds,
        clients=task.num_clients,
        clients_per_round=len(clients),
        fewest_providers=400,
    )
    party = FederatedClient.build(config, task, method, clients=clients)
    start = get_values(party.model, party.parameters)
    print(
        f"preset {args.preset}, m = {args.providers}, {party.parameters.numel:,} communicated "
        f"values, batch size {config.batch_size}, local epochs {config.local_epochs}"
    )

    def dp_round(path: str) -> dict[str, float]:
        method.options = dataclasses.replace(method.options, provider_path=path)
        examples = providers = 0
        for client in clients:
            job = party.job(1, client, start)
            sampled = method.sampled_providers(job)
            update = method.compute_update(job)
            providers += int(update.metrics["sampled_providers"])
            examples += sum(len(rows) for rows in sampled.values())
        return {"providers": providers, "examples": examples}

    def plain_round() -> None:
        for client in clients:
            job = party.job(1, client, start)
            rows = [i for group in method.sampled_providers(job).values() for i in group]
            job.reset()
            job.train(job.dataset.select(rows))

    shape = dp_round("streamed")  # warm-up: page images decoded and cached, allocator warm
    print(f"sampled providers {shape['providers']}, examples {shape['examples']} (2 clients)")
    timings: dict[str, float] = {}
    for name, call in (
        ("non-private", plain_round),
        ("reference", lambda: dp_round("reference")),
        ("streamed", lambda: dp_round("streamed")),
    ):
        tic = time.perf_counter()
        call()
        timings[name] = time.perf_counter() - tic
        print(f"{name:>12}: {timings[name]:7.2f} s per round  (load {os.getloadavg()[0]:.2f})")
    for name in ("reference", "streamed"):
        print(f"{name} / non-private: {timings[name] / timings['non-private']:.2f}x")
    print(f"streamed saves {1 - timings['streamed'] / timings['reference']:.1%} of the reference")

    wall, phases = _profile_phases(lambda: dp_round("reference"))
    print(f"\nreference DP round under cProfile: {wall:.2f} s")
    for label, seconds in phases.items():
        print(f"  {label:<34} {seconds:7.2f} s  {seconds / wall:6.1%}")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
