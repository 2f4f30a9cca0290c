"""Command-line group of the `baselines` package (wired into `pflkit` by pflkit/cli.py)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from baselines.train_help import NO_NAMES

if TYPE_CHECKING:
    from baselines.config import TrainConfig

#: options whose value may differ when a run is resumed.
RESUMABLE_CHANGES = frozenset({"rounds", "val_limit", "eval_batch_size", "device"})


def _csv(value: str | None) -> tuple[str, ...] | None:
    """Split a comma-separated option (``none``: the empty list, which the component may
    refuse, as LoRA does for targets)."""
    if value is None:
        return None
    if value.strip().lower() == NO_NAMES:
        return ()
    items = tuple(part.strip() for part in value.split(",") if part.strip())
    if not items:
        raise click.BadParameter(f"give at least one comma-separated name, or {NO_NAMES}")
    return items


#: ``Context.meta`` key: this invocation only asks for the help (or a shell completion).
_HELP_ONLY = "baselines.train.help_only"


class TrainCommand(click.Command):
    """``pflkit train``: the preset, strategy and optimiser choices and every component's options
    come from the registries, through their light copy when only the help is asked for
    (:mod:`baselines.train_help`), so ``pflkit train --help`` does not import torch."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Note whether the arguments ask only for the help, then parse them."""
        ctx.meta[_HELP_ONLY] = ctx.resilient_parsing or any(
            arg in ctx.help_option_names for arg in args
        )
        return super().parse_args(ctx, args)

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        """The registries' options, then the static ones."""
        return [*_registry_options(help_only=ctx.meta.get(_HELP_ONLY, False)),
                *super().get_params(ctx)]  # fmt: skip


@functools.cache
def _registry_options(*, help_only: bool) -> tuple[click.Parameter, ...]:
    """The registries' options: from their light copy for a help, from the registries to run."""
    from baselines.train_help import describe_registries, read_copy, registry_options

    description = (read_copy() if help_only else None) or describe_registries()
    return tuple(registry_options(description))


@click.command("train", cls=TrainCommand)
@click.option(
    "--data",
    "data_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="PFL-DocVQA data directory (imdb_train_client_{k}.npy + imdb_val.npy).",
)
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Run directory (logs, metrics, state, checkpoint, submission.json).",
)
@click.option(
    "--base",
    default="base",
    show_default=True,
    help="Pre-trained checkpoint every party starts from (directory or `base`).",
)
@click.option(
    "--family",
    default=None,
    help="The model family the run trains (vt5, pix2struct, ...: benchmark/model/families/); "
    "checked against --base's config.json (default: --base's family; `base` is VT5).",
)
@click.option("--rounds", type=int, help="Federated rounds.")
@click.option("--clients-per-round", type=int, help="Clients sampled per round (M of K).")
@click.option("--local-epochs", type=int, help="Local epochs per round.")
@click.option("--batch-size", type=int, help="Local batch size.")
@click.option("--max-grad-norm", type=float, help="Clip local gradients to this norm.")
@click.option(
    "--quantize",
    type=click.Choice(["none", "nf4"]),
    help="Wire quantisation of every message (nf4: 4 bits + fp32 scale per 64 values).",
)
@click.option(
    "--wire",
    metavar="NAME",
    help="Wire format of every message, a format of benchmark/wire_formats/: fp32, nf4, nf4-B "
    "(blocks of B values, B a power of two from 128 to 4096). --quantize nf4 is --wire nf4.",
)
@click.option("--seed", type=int, help="Seed of sampling, shuffling and adapter initialisation.")
@click.option(
    "--val-limit",
    type=int,
    help="Evaluate on the first N validation questions after each round (0: skip).",
)
@click.option("--eval-batch-size", type=int, help="Validation batch size.")
@click.option(
    "--device",
    type=str,
    default=None,
    help="auto (CUDA when torch sees a GPU, else the CPU; the default), cpu, cuda or "
    "cuda:N. Logs, messages and the checkpoint are the same on every device; "
    "--resume may change it.",
)
@click.option(
    "--precision",
    type=click.Choice(["fp32", "bf16"]),
    default=None,
    help="fp32 (default), or bf16 autocast around the local forward passes.",
)
@click.option(
    "--gradient-checkpointing/--no-gradient-checkpointing",
    default=None,
    help="Recompute the T5 blocks' activations in the backward pass (less memory).",
)
@click.option(
    "--threads",
    type=int,
    help="CPU threads of torch (1 is fastest for small models on a busy machine).",
)
@click.option(
    "--resume", is_flag=True, help="Continue the run in --out from its last completed round."
)
@click.option(
    "--engine",
    type=click.Choice(["in-process", "flower", "flower-simulation"]),
    default="in-process",
    show_default=True,
    help="in-process: the kit's simulation; flower: Flower's deployment engine "
    "(SuperLink + SuperNodes, `pflkit flower --help`); flower-simulation: "
    "Flower's simulation engine (`pflkit flower superlink --simulation`, "
    "--federation local-simulation). Both need `make flower-setup`.",
)
@click.option(
    "--federation",
    help="--engine flower[-simulation]: the SuperLink connection in "
    "$FLWR_HOME/config.toml (default: local-deployment, which `pflkit flower "
    "superlink` writes; local-simulation for flower-simulation, which "
    "`pflkit flower superlink --simulation` writes).",
)
@click.option(
    "--on-failure",
    type=click.Choice(["fail", "drop", "wait"]),
    default="fail",
    show_default=True,
    help="--engine flower: a SuperNode failing mid-round stops the run (resume later), "
    "is dropped from the round, or is waited for.",
)
@click.option(
    "--num-clients",
    type=int,
    help="--engine flower: K when --data on this machine does not hold every "
    "client's file (default: counted from --data).",
)
@click.option(
    "--recipe",
    "recipe_file",
    type=click.Path(dir_okay=False, exists=True),
    help="Train the run a recipe.json describes (its preset, configuration and seed, and its "
    "threads unless --threads is given); only --device may change it. Organisers re-run "
    "submissions this way (`pflkit reproduce`).",
)
@click.option("--no-progress", is_flag=True, help="Hide progress bars.")
def train(
    preset: str | None,
    method_alias: str | None,
    data_dir: str,
    out_dir: str,
    base: str,
    family: str | None,
    resume: bool,
    threads: int | None,
    no_progress: bool,
    quantize: str | None,
    engine: str,
    federation: str | None,
    on_failure: str,
    num_clients: int | None,
    recipe_file: str | None,
    **options: object,
) -> None:
    """Train a federated baseline and write its logs and submission.

    --preset (or its alias --method) names a recipe; every other option overrides one of its
    values. Writes RUN_DIR/communication_log.csv (competition format), communication_log.jsonl,
    metrics.jsonl (validation ANLS per round), checkpoint/ and submission.json; the track-2
    presets (dp-fedavg, dp-lora) also write privacy.json (check it with `pflkit dp verify`);
    the track-3 presets (fedavg-ft, local-only) also write personal/client_{k}.safetensors
    (score them with `pflkit evaluate RUN_DIR/checkpoint --split test --personal RUN_DIR/personal`).
    With --fsp-rounds N (the fsp-* presets) the run first pre-trains for N federated rounds on the
    clients' pages (RUN_DIR/pretraining/); their messages open the same communication log.
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

    recipe_config = None
    if recipe_file is not None:
        if quantize is not None:
            raise click.UsageError("--recipe trains the recipe as it is; drop --quantize")
        recipe_config, recipe_threads = _recipe_run(recipe_file, preset or method_alias, options)
        preset, method_alias = recipe_config.preset, None
        threads = recipe_threads if threads is None else threads
    if threads is not None:
        if threads < 1:
            raise click.BadParameter("must be >= 1", param_hint="--threads")
        import torch

        torch.set_num_threads(threads)

    from baselines.config import TrainConfig, all_option_specs
    from baselines.engine.document_task import build_task
    from baselines.fsp_phase.federation import build_federation
    from baselines.presets import all_presets, preset_config
    from baselines.run_directory import RunDirectory

    flag = "--method" if method_alias is not None else "--preset"
    if preset is not None and method_alias is not None and preset != method_alias:
        raise click.BadParameter("give the preset once (--method is an alias of --preset)")
    preset = preset or method_alias
    if preset is None:
        raise click.UsageError("Missing option '--preset' (or its alias '--method').")
    if preset not in all_presets():
        raise click.BadParameter(
            f"unknown {flag.lstrip('-')} {preset!r}; choose a preset: {', '.join(all_presets())}",
            param_hint=flag,
        )
    specs = all_option_specs()
    overrides: dict[str, object] = {}
    for key, value in options.items():
        spec = specs.get(key)
        if spec is not None and value is not None:
            value = _csv(value) if spec.kind == "csv" else spec.to_field(value)
        overrides[key] = value
    if quantize is not None:
        if overrides.get("wire") is not None:
            raise click.UsageError("give the wire format once: --wire or --quantize")
        overrides["wire"] = "fp32" if quantize == "none" else quantize
    run_dir = RunDirectory(out_dir)
    if family is not None:
        _check_family(family, base)
    try:
        config = preset_config(preset, **overrides) if recipe_config is None else recipe_config
        if recipe_config is not None and options.get("device") is not None:
            config = config.replace(device=str(options["device"]))
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
        if engine == "in-process":
            device = _training_device(config.device)
        else:
            _train_on_flower(
                config,
                run_dir,
                data_dir=data_dir,
                base=base,
                resume=resume,
                federation=federation,
                on_failure=on_failure,
                num_clients=num_clients,
                simulation=engine == "flower-simulation",
            )
            return
        task = build_task(
            data_dir,
            base,
            val_limit=config.val_limit,
            eval_batch_size=config.eval_batch_size,
            progress=not no_progress,
        )
        simulation = build_federation(
            config, task, run_dir, data_dir=data_dir, base=base, progress=not no_progress
        )
    except (ValueError, FileNotFoundError) as error:
        raise click.ClickException(str(error)) from error
    run_dir.write_config(
        {
            "config": config.to_dict(),
            "data": str(Path(data_dir).resolve()),
            "base": base,
            "device": str(device),
        }
    )
    _write_recipe(run_dir, config, data_dir=data_dir, base=base, device=str(device))
    summary = simulation.run(resume=resume)
    click.echo(json.dumps(simulation.run_record(summary), indent=2))


def _check_family(family: str, base: str) -> None:
    """A usage error when ``--base`` is not a checkpoint of ``--family``, saying how to get one."""
    from benchmark.model import read_checkpoint_config, resolve_checkpoint
    from benchmark.model.families import UnknownFamily, family_named
    from benchmark.model.safetensors_header import CheckpointError

    try:
        wanted = family_named(family)
        found = read_checkpoint_config(resolve_checkpoint(base)).model_type
    except UnknownFamily as error:
        raise click.BadParameter(str(error), param_hint="--family") from error
    except (CheckpointError, FileNotFoundError) as error:
        raise click.ClickException(str(error)) from error
    if found != wanted.name:
        raise click.UsageError(
            f"--family {wanted.name} but --base {base} is a {family_named(found).title} checkpoint; "
            f"write a {wanted.title} base with `pflkit model init --family {wanted.name} --shape "
            "tiny --out DIR` (random weights) and pass --base DIR"
        )


def _recipe_run(
    recipe_file: str, preset: str | None, options: dict[str, object]
) -> tuple[TrainConfig, int | None]:
    """The configuration and threads of ``--recipe``; a usage error for options that would
    change the recipe."""
    from baselines.recipe import read_recipe

    changed = sorted(key for key, value in options.items()
                     if value is not None and key != "device")  # fmt: skip
    if changed:
        flags = ", ".join("--" + key.replace("_", "-") for key in changed)
        raise click.UsageError(f"--recipe trains the recipe as it is; drop {flags}")
    try:
        config, threads = read_recipe(Path(recipe_file))
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--recipe") from None
    if preset is not None and preset != config.preset:
        raise click.BadParameter(
            f"the recipe is a {config.preset!r} run, not {preset!r}; drop --preset",
            param_hint="--recipe",
        )
    return config, threads


def _write_recipe(run_dir: Any, config: TrainConfig, **where: str) -> None:
    """``RUN_DIR/recipe.json`` (:mod:`baselines.recipe`), once: a resumed run keeps its own."""
    from baselines.recipe import RECIPE_FILE, build_recipe
    from baselines.run_directory import atomic_write_json

    path = Path(run_dir.path) / RECIPE_FILE
    if not path.is_file():
        atomic_write_json(path, build_recipe(config, **where))


def _training_device(requested: str) -> Any:
    """The device ``--device`` names on this machine, or a usage error saying why not."""
    from benchmark.model.device import resolve_device

    try:
        return resolve_device(requested)
    except ValueError as error:
        raise click.BadParameter(
            str(error).removeprefix(f"--device {requested}: "), param_hint="--device"
        ) from None


def _train_on_flower(
    config: TrainConfig,
    run_dir: Any,
    *,
    data_dir: str,
    base: str,
    resume: bool,
    federation: str | None,
    on_failure: str,
    num_clients: int | None,
    simulation: bool,
) -> None:
    """``pflkit train --engine flower``: check the SuperLink connection (``federation``, by
    default the engine's), write the run's configuration, ``flwr run`` the kit's app on it and
    print the ServerApp's summary.

    Raises:
        click.ClickException: flwr is missing, the connection is unknown or does not answer
            (nothing is written then), or the run ended unfinished.
        ValueError: options the Flower engines do not take.
    """
    from baselines.flower.cli import (
        check_connection,
        default_connection,
        flower_command,
        run_on_flower,
    )
    from benchmark.data.reader import count_clients

    if config.build_pretraining().rounds:
        raise ValueError("--fsp-rounds runs on the in-process engine only (--engine in-process)")
    flower_command("flwr")
    federation = federation or default_connection(simulation)
    check_connection(federation, simulation=simulation)
    if num_clients is None:
        num_clients = count_clients(data_dir)
    if config.clients_per_round > num_clients:
        raise ValueError(
            f"--clients-per-round {config.clients_per_round} exceeds the {num_clients} "
            f"clients of the data; use at most {num_clients}"
        )
    run_dir.write_config(
        {"config": config.to_dict(), "data": str(Path(data_dir).resolve()), "base": base}
    )
    _write_recipe(run_dir, config, data_dir=data_dir, base=base, device=config.device)
    summary = run_on_flower(
        federation=federation,
        out=run_dir.path,
        num_clients=num_clients,
        on_failure=on_failure,
        resume=resume,
        simulation=simulation,
    )
    click.echo(json.dumps(summary, indent=2))


def _resumed_config(
    saved: TrainConfig, requested: TrainConfig, overrides: dict[str, object]
) -> TrainConfig:
    """The saved configuration, with only the options that may change on resume applied."""
    from baselines.methods import METHODS

    given = {key: value for key, value in overrides.items() if value is not None}
    conflicts = [
        key
        for key, value in given.items()
        if key not in RESUMABLE_CHANGES and saved.get(key) != requested.get(key)
    ]
    if conflicts or requested.preset != saved.preset:
        names = ", ".join(sorted(conflicts)) or "method"
        raise ValueError(f"--resume cannot change {names}; the run was started with other values")
    changes = {key: given[key] for key in RESUMABLE_CHANGES if key in given}
    if changes.get("rounds", saved.rounds) < saved.rounds:
        raise ValueError("--resume cannot lower --rounds")
    if METHODS[saved.method].private and changes.get("rounds", saved.rounds) != saved.rounds:
        raise ValueError(
            "--resume cannot change --rounds of a DP run: its noise is calibrated to them"
        )
    return saved.replace(**changes)
