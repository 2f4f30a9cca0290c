"""Real-shape message sizes per model family: FedAvg and LoRA r6, fp32 and NF4.

Each family's ``base`` shape (the public checkpoint's architecture, :mod:`benchmark.model.families`)
is built on the meta device (no memory, no weights) and prepared by the kit's own methods with
their default options, read in the family's module names: full fine-tuning (``fedavg``: every
parameter but the frozen ones) and LoRA rank 6 on the default targets (the track-2 winner's
``dp-lora``). The communicated parameters are its trained parameters (what
:func:`baselines.core.parameters.select_communicated` sends, tied tensors once); their bytes are the wire formats'
formulas (:mod:`benchmark.wire_formats`), one client's upload in one round.

    python -m bench.family_sizes [--out docs/results/data/family_sizes.json]

It writes the table's data file (:mod:`experiments.results_file`: one row per family and method,
with the date, machine, versions and command), which ``docs/participants/model-families.md``
renders.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import torch

from baselines.methods.full import FullFineTuning
from baselines.methods.lora import LoRA
from benchmark.model.families import FAMILIES
from benchmark.shipped import BASE_MODEL_DIR
from benchmark.wire_formats import data_bytes
from experiments.results_file import Column, code, command_line, number, text, write_results_table

DEFAULT_OUT = Path("docs/results/data/family_sizes.json")
#: The table's columns: the keys of :func:`family_sizes`'s rows (one client's upload in one round).
COLUMNS: tuple[Column, ...] = (
    text("family", "family"),
    code("public_checkpoint", "public checkpoint"),
    text("method", "method"),
    number("parameters", "parameters", "int"),
    number("communicated_values", "values sent", "int"),
    number("fp32_bytes", "fp32 bytes", "int"),
    number("nf4_bytes", "NF4 bytes", "int"),
)


def family_sizes(name: str) -> list[dict[str, Any]]:
    """One row per method: parameters, communicated values, fp32 and NF4 bytes per message."""
    family = FAMILIES[name]
    rows = []
    for label, method in (("fedavg (full)", FullFineTuning()), ("lora r6", LoRA(rank=6))):
        with torch.device("meta"):
            model, _ = family.random_model("base", BASE_MODEL_DIR)
            total = sum(p.numel() for p in model.parameters())
            prepared = method.prepare(model, seed=0)
        # on the meta device every tensor seems to share one storage, so the trained parameters
        # (tied ones once) stand for select_communicated's message
        numels = [p.numel() for p in prepared.parameters() if p.requires_grad]
        rows.append({
            "family": name, "public_checkpoint": family.public_checkpoint, "method": label,
            "parameters": total, "communicated_values": sum(numels),
            "fp32_bytes": data_bytes("fp32", numels), "nf4_bytes": data_bytes("nf4", numels),
        })  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> None:
    """Write the table's data file: one row per family and method."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    rows = [row for name in sorted(FAMILIES) for row in family_sizes(name)]
    command = command_line("bench.family_sizes", sys.argv[1:] if argv is None else argv)
    print(write_results_table(args.out, COLUMNS, rows, command=command))


if __name__ == "__main__":
    main()
