"""The `pflkit` console command.

Each kit package owns its command group in its own `cli.py`; this module only
assembles them, so `pflkit --help` lists every package's commands without
importing torch or the web stack.
"""

from __future__ import annotations

import importlib

import click

# (module, attribute) of every command or group the kit exposes, in help order.
COMMANDS: tuple[tuple[str, str], ...] = (
    ("benchmark.data.cli", "data"),
    ("benchmark.evaluation.cli", "evaluate"),
    ("benchmark.pretraining.cli", "pretrain"),
    ("benchmark.model.cli", "model"),
    ("baselines.cli", "train"),
    ("baselines.flower.cli", "flower"),
    ("pflkit.dp", "dp"),
    ("pflkit.serve", "serve"),
    ("evaluator.cli", "worker"),
    ("evaluator.cli", "team"),
    ("evaluator.cli", "submit"),
    ("evaluator.cli", "status"),
    ("evaluator.cli", "audit"),
    ("evaluator.reproduction.cli", "reproduce"),
    ("evaluator.cli", "evaluator_group"),
    ("leaderboard.cli", "leaderboard"),
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="pfl-docvqa-kit")
def main() -> None:
    """PFL-DocVQA Kit: benchmark, federated baselines, privacy accountant and scoring service."""


def _register_commands() -> None:
    for module_name, attribute in COMMANDS:
        module = importlib.import_module(module_name)
        command = getattr(module, attribute, None)
        if command is not None:
            main.add_command(command)


_register_commands()

if __name__ == "__main__":
    main()
