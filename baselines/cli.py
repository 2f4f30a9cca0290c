"""Command-line group of the `baselines` package (wired into `pflkit` by pflkit/cli.py)."""

from __future__ import annotations

import json
from pathlib import Path

import click

PRESET_NAMES = ("fedavg", "lora", "lora-1client", "lora-nf4", "dp-fedavg", "dp-lora")
STRATEGY_NAMES = ("fedavg", "fedavgm", "fedadam", "fedyogi")
#: options whose value may differ when a run is resumed.
RESUMABLE_CHANGES = frozenset({"rounds", "val_limit", "eval_batch_size"})


def _csv(value: str | None) -> tuple[str, ...] | None:
    """Split a comma-separated option."""
    if value is None:
        return None
    items = tuple(part.strip() for part in value.split(",") if part.strip())
    if not items:
        raise click.BadParameter("give at least one comma-separated name")
    return items


@click.command("train")
@click.option("--method", "preset", required=True, metavar="NAME",
              help=f"Preset recipe: one of {', '.join(PRESET_NAMES)}.")
@click.option("--data", "data_dir", required=True, type=click.Path(file_okay=False),
              help="PFL-DocVQA data directory (imdb_train_client_{k}.npy + imdb_val.npy).")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Run directory (logs, metrics, state, checkpoint, submission.json).")
@click.option("--base", default="base", show_default=True,
              help="Pre-trained checkpoint every party starts from (directory or `base`).")
@click.option("--rounds", type=int, help="Federated rounds.")
@click.option("--clients-per-round", type=int, help="Clients sampled per round (M of K).")
@click.option("--local-epochs", type=int, help="Local epochs per round.")
@click.option("--batch-size", type=int, help="Local batch size.")
@click.option("--lr", type=float, help="Local AdamW learning rate.")
@click.option("--weight-decay", type=float, help="Local AdamW weight decay.")
@click.option("--max-grad-norm", type=float, help="Clip local gradients to this norm.")
@click.option("--lora-rank", type=int, help="LoRA rank.")
@click.option("--lora-alpha", type=float, help="LoRA alpha (default 2 x rank).")
@click.option("--lora-targets", help="Comma-separated module names that get adapters (T5: q, k, v, o, wi, wo).")
@click.option("--quantize", type=click.Choice(["none", "nf4"]),
              help="Wire quantisation of every message (nf4: 4 bits + fp32 scale per 64 values).")
@click.option("--strategy", help=f"Server strategy: one of {', '.join(STRATEGY_NAMES)}.")
@click.option("--unweighted", is_flag=True, default=None,
              help="Average client updates without weighting by examples.")
@click.option("--server-lr", type=float, help="Server learning rate (strategy default if unset).")
@click.option("--server-momentum", type=float, help="FedAvgM momentum.")
@click.option("--seed", type=int, help="Seed of sampling, shuffling and adapter initialisation.")
@click.option("--val-limit", type=int,
              help="Evaluate on the first N validation questions after each round (0: skip).")
@click.option("--eval-batch-size", type=int, help="Validation batch size.")
@click.option("--epsilon", type=float,
              help="dp- methods: target epsilon per provider (the noise is calibrated to it).")
@click.option("--delta", type=float, help="dp- methods: target delta (default 1e-5).")
@click.option("--noise-multiplier", type=float,
              help="dp- methods: noise multiplier sigma instead of calibrating it.")
@click.option("--clipping-norm", type=float,
              help="dp- methods: L2 bound of one provider's update (default 0.5).")
@click.option("--providers-per-round", type=int,
              help="dp- methods: expected providers per sampled client per round "
                   "(default 50/400 of the fewest providers at a client).")
@click.option("--sampling", "provider_sampling", type=click.Choice(["poisson", "fixed"]),
              help="dp- methods: provider sampling (fixed is not covered by the accountant).")
@click.option("--analysis", "privacy_analysis", type=click.Choice(["competition", "strict"]),
              help="dp- methods: sampling-rate analysis (strict: no amplification by clients).")
@click.option("--threads", type=int,
              help="CPU threads of torch (1 is fastest for small models on a busy machine).")
@click.option("--resume", is_flag=True, help="Continue the run in --out from its last completed round.")
@click.option("--no-progress", is_flag=True, help="Hide progress bars.")
def train(
    preset: str,
    data_dir: str,
    out_dir: str,
    base: str,
    resume: bool,
    threads: int | None,
    no_progress: bool,
    quantize: str | None,
    lora_targets: str | None,
    unweighted: bool | None,
    **options: object,
) -> None:
    """Train a federated track-1 baseline and write its logs and submission.

    Writes RUN_DIR/communication_log.csv (competition format), communication_log.jsonl,
    metrics.jsonl (validation ANLS per round), checkpoint/ and submission.json; the track-2
    methods (dp-fedavg, dp-lora) also write privacy.json (check it with `pflkit dp verify`).
    """
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

    if no_progress:
        import datasets
        import transformers

        datasets.disable_progress_bars()
        transformers.utils.logging.disable_progress_bar()

    if threads is not None:
        if threads < 1:
            raise click.BadParameter("must be >= 1", param_hint="--threads")
        import torch

        torch.set_num_threads(threads)

    from baselines.config import TrainConfig
    from baselines.engine import FederatedSimulation
    from baselines.presets import DP_PRESETS, PRESETS, preset_config
    from baselines.run_directory import RunDirectory
    from baselines.vt5 import build_vt5_task

    if preset not in {**PRESETS, **DP_PRESETS}:
        raise click.BadParameter(
            f"unknown method {preset!r}; choose one of {', '.join(PRESET_NAMES)}",
            param_hint="--method",
        )
    overrides = dict(options)
    overrides["wire"] = None if quantize is None else ("fp32" if quantize == "none" else quantize)
    overrides["lora_targets"] = _csv(lora_targets)
    overrides["weighted"] = None if unweighted is None else not unweighted
    run_dir = RunDirectory(out_dir)
    try:
        config = preset_config(preset, **overrides)
        if resume:
            saved = run_dir.read_config()
            config = _resumed_config(TrainConfig.from_dict(saved["config"]), config, overrides)
            if saved["data"] != str(Path(data_dir).resolve()) or saved["base"] != base:
                raise ValueError(
                    f"--resume with other data or base than the run ({saved['data']}, "
                    f"{saved['base']})"
                )
        elif not run_dir.is_empty():
            raise ValueError(
                f"{out_dir} is not empty: pass --resume to continue that run or choose a new --out"
            )
        task = build_vt5_task(
            data_dir,
            base,
            val_limit=config.val_limit,
            eval_batch_size=config.eval_batch_size,
            progress=not no_progress,
        )
        simulation = FederatedSimulation(config, task, run_dir, progress=not no_progress)
    except (ValueError, FileNotFoundError) as error:
        raise click.ClickException(str(error)) from error
    run_dir.write_config(
        {"config": config.to_dict(), "data": str(Path(data_dir).resolve()), "base": base}
    )
    summary = simulation.run(resume=resume)
    click.echo(
        json.dumps(
            {
                "run_dir": str(run_dir.path),
                "rounds": summary.rounds,
                "bytes_per_message": summary.bytes_per_message,
                "total_bytes": summary.total_bytes,
                "val_anls": summary.metrics[-1].get("val_anls") if summary.metrics else None,
                "wall_seconds": round(summary.timing["wall"], 2),
                "engine_overhead": round(summary.overhead, 3),
            },
            indent=2,
        )
    )


def _resumed_config(saved, requested, overrides: dict[str, object]):
    """The saved configuration, with only the options that may change on resume applied."""
    given = {key: value for key, value in overrides.items() if value is not None}
    conflicts = [
        key
        for key, value in given.items()
        if key not in RESUMABLE_CHANGES and getattr(saved, key) != getattr(requested, key)
    ]
    if conflicts or requested.preset != saved.preset:
        names = ", ".join(sorted(conflicts)) or "method"
        raise ValueError(f"--resume cannot change {names}; the run was started with other values")
    changes = {key: given[key] for key in RESUMABLE_CHANGES if key in given}
    if changes.get("rounds", saved.rounds) < saved.rounds:
        raise ValueError("--resume cannot lower --rounds")
    if saved.method.startswith("dp-") and changes.get("rounds", saved.rounds) != saved.rounds:
        raise ValueError("--resume cannot change --rounds of a DP run: its noise is calibrated to them")
    return saved.replace(**changes)
