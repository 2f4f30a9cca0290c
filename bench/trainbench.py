"""One client's local round through the kit's own client path: seconds, examples per second,
peak memory, per preset and training setting.

Each configuration builds a party holding client 0 (:meth:`baselines.engine.client.FederatedClient.build`,
so the model is placed on ``--device`` exactly as ``pflkit train`` places it), encodes the base's
communicated values as the server would, and times :meth:`FederatedClient.fit` for one round:
local training (or, for a DP preset, the per-provider path with its clipping and noise), the
delta and its encoding. A first fit warms up (CUDA kernels, caches); the second is timed. The
peak memory is ``torch.cuda.max_memory_allocated`` on CUDA and the process's peak resident set
on the CPU.

Usage::

    pflkit model init --shape vt5-base --out .bench/vt5-base
    python -m bench.trainbench --data DIR --base .bench/vt5-base --device cuda \\
        --settings fp32,bf16,bf16+gc,bf16+gc+8bit --presets fedavg,lora-qv-r6,dp-lora \\
        --batch-size 10 --examples 40 --out .bench/trainbench.json

``--examples`` caps the client's data (its first N questions) so a configuration takes seconds;
a DP preset trains its sampled providers' questions instead (``--providers`` sets m).
A setting is ``fp32`` or ``bf16``, with ``+gc`` (gradient checkpointing) and ``+8bit`` (the
8-bit AdamW); the presets are the kit's, plus ``lora-qv-r6`` (``lora`` at rank 6 on ``q`` and
``v``, the winner's adapters).
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path
from typing import Any

#: presets that are a kit preset with some options changed.
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "lora-qv-r6": ("lora", {"lora_rank": 6, "lora_targets": ("q", "v")}),
}
#: DP presets get this noise multiplier (the timing does not depend on it) and m.
DP_NOISE = {"noise_multiplier": 1.0}


def setting_overrides(setting: str) -> dict[str, Any]:
    """``TrainConfig`` values of a setting name such as ``bf16+gc+8bit``."""
    precision, *flags = setting.split("+")
    unknown = set(flags) - {"gc", "8bit"}
    if precision not in ("fp32", "bf16") or unknown:
        raise SystemExit(f"setting {setting!r}: use fp32 or bf16, optionally +gc and +8bit")
    values: dict[str, Any] = {"precision": precision, "gradient_checkpointing": "gc" in flags}
    if "8bit" in flags:
        values["optimizer"] = "adamw8bit"
    return values


def measure(
    preset: str,
    setting: str,
    *,
    data: Path,
    base: str,
    device: str,
    batch_size: int,
    examples: int,
    providers: int | None,
) -> dict[str, Any]:
    """Time one client's round of ``preset`` at ``setting``; the figures as a dict."""
    import torch

    from baselines.core.parameters import get_values
    from baselines.engine.client import FederatedClient
    from baselines.engine.communication import encode_message
    from baselines.engine.document_task import build_task
    from baselines.presets import DP_COMPETITION_PRESETS, DP_PRESETS, preset_config

    name, extra = VARIANTS.get(preset, (preset, {}))
    if name in DP_PRESETS or name in DP_COMPETITION_PRESETS:
        extra = {**DP_NOISE, **extra}
        if providers is not None:
            extra["providers_per_round"] = providers
    config = preset_config(
        name,
        **extra,
        **setting_overrides(setting),
        device=device,
        batch_size=batch_size,
        local_epochs=1,
        clients_per_round=1,
    )
    task = build_task(data, base, val_limit=0, progress=False)
    method = config.build_method()
    method.bind(task)  # a DP method calibrates on every client's providers
    if not method.private:  # a DP round trains its m sampled providers' questions instead
        task.client_data[0] = task.client_data[0].select(
            range(min(examples, len(task.client_data[0])))
        )
    party = FederatedClient.build(config, task, method, clients=[0])
    broadcast = encode_message(party.codec, get_values(party.model, party.parameters))
    cuda = next(party.model.parameters()).device.type == "cuda"
    party.fit(1, 0, broadcast)  # warm-up
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    reply = party.fit(2, 0, broadcast)
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    steps = reply.metrics.get("steps", 0.0)
    trained = (
        steps * batch_size
        if "sampled_providers" in reply.metrics
        else reply.metrics.get("examples", steps * batch_size)
    )
    peak = (
        torch.cuda.max_memory_allocated()
        if cuda
        else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    )
    return {
        "preset": preset,
        "setting": setting,
        "device": str(next(party.model.parameters()).device),
        "seconds": round(seconds, 3),
        "steps": steps,
        "examples": trained,
        "examples_per_second": round(trained / seconds, 2) if seconds > 0 else None,
        "loss": reply.metrics.get("loss"),
        "message_bytes": reply.message.data_bytes,
        "peak_memory_bytes": int(peak),
        "peak_memory_kind": "cuda" if cuda else "cpu-rss",
    }


def main(argv: list[str] | None = None) -> None:
    """Measure every (preset, setting) and print a table; ``--out`` writes the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--base", default="base")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--presets", default="fedavg,lora-qv-r6,dp-lora")
    parser.add_argument("--settings", default="fp32,bf16")
    parser.add_argument("--batch-size", type=int, default=10)
    parser.add_argument("--examples", type=int, default=40)
    parser.add_argument(
        "--providers",
        type=int,
        default=None,
        help="providers per round of the DP presets (default: the preset's)",
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    rows = []
    for preset in args.presets.split(","):
        for setting in args.settings.split(","):
            row = measure(
                preset,
                setting,
                data=args.data,
                base=args.base,
                device=args.device,
                batch_size=args.batch_size,
                examples=args.examples,
                providers=args.providers,
            )
            rows.append(row)
            print(
                f"{row['preset']:>12} {row['setting']:>14} {row['device']:>7} "
                f"{row['seconds']:>8.2f} s {row['examples_per_second']!s:>8} ex/s "
                f"peak {row['peak_memory_bytes'] / 2**30:6.2f} GiB "
                f"({row['peak_memory_kind']}) message {row['message_bytes']:,} B",
                flush=True,
            )
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
