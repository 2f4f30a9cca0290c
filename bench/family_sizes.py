"""Real-shape message sizes per model family: FedAvg and LoRA r6, fp32 and NF4.

Each family's ``base`` shape (the public checkpoint's architecture, :mod:`benchmark.model.families`)
is built on the meta device (no memory, no weights) and prepared by the kit's own methods with
their default options, read in the family's module names: full fine-tuning (``fedavg``: every
parameter but the frozen ones) and LoRA rank 6 on the default targets (the track-2 winner's
``dp-lora``). The communicated parameters are its trained parameters (what
:func:`baselines.core.parameters.select_communicated` sends, tied tensors once); their bytes are the wire formats'
formulas (:mod:`benchmark.wire_formats`), one client's upload in one round.

    python -m bench.family_sizes [--out docs/results/family_sizes.jsonl]

The table is also written beside the JSONL as Markdown (``family_sizes.md``), which the docs
include as it is.
"""

from __future__ import annotations

import argparse
import json
from datetime import date
from pathlib import Path
from typing import Any

import torch

from baselines.methods.full import FullFineTuning
from baselines.methods.lora import LoRA
from benchmark.model.families import FAMILIES
from benchmark.shipped import BASE_MODEL_DIR
from benchmark.wire_formats import data_bytes

DEFAULT_OUT = Path("docs/results/family_sizes.jsonl")


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


def main() -> None:
    """Print the table and write one JSON line per family and method."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    rows = [row for name in sorted(FAMILIES) for row in family_sizes(name)]
    stamp = {"date": date.today().isoformat(), "command": "python -m bench.family_sizes"}
    args.out.write_text("".join(json.dumps({**row, **stamp}) + "\n" for row in rows))
    table = markdown_table(rows)
    args.out.with_suffix(".md").write_text(table)
    print(table, end="")


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table (one client's upload in one round)."""
    lines = ["| family | public checkpoint | method | parameters | values sent | fp32 bytes "
             "| NF4 bytes |", "| --- | --- | --- | ---: | ---: | ---: | ---: |"]  # fmt: skip
    lines += [f"| {row['family']} | `{row['public_checkpoint']}` | {row['method']} | "
              f"{row['parameters']:,} | {row['communicated_values']:,} | {row['fp32_bytes']:,} | "
              f"{row['nf4_bytes']:,} |" for row in rows]  # fmt: skip
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
