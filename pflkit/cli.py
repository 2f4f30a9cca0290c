"""The `pflkit` console command.

Each kit package owns its command group in its own `cli.py`; this module only
assembles them, so `pflkit --help` lists every package's commands without
importing torch or the web stack, and a command imports only its own package's
`cli.py` (tests/pflkit/test_startup.py checks which modules each one loads).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import click

#: name -> (module, attribute) of every command or group the kit exposes. A module is imported
#: only when its command is asked for (``pflkit --help`` asks for all of them, for their lines).
COMMANDS: dict[str, tuple[str, str]] = {
    "data": ("benchmark.data.cli", "data"),
    "evaluate": ("benchmark.evaluation.cli", "evaluate"),
    "pretrain": ("benchmark.pretraining.cli", "pretrain"),
    "model": ("benchmark.model.cli", "model"),
    "train": ("baselines.cli", "train"),
    "flower": ("baselines.flower.cli", "flower"),
    "dp": ("pflkit.dp", "dp"),
    "serve": ("pflkit.serve", "serve"),
    "worker": ("evaluator.cli", "worker"),
    "team": ("evaluator.cli", "team"),
    "submit": ("evaluator.cli", "submit"),
    "status": ("evaluator.cli", "status"),
    "audit": ("evaluator.cli", "audit"),
    "reproduce": ("evaluator.reproduction.cli", "reproduce"),
    "evaluator": ("evaluator.cli", "evaluator_group"),
    "leaderboard": ("leaderboard.cli", "leaderboard"),
}

#: group -> {name -> (module, attribute)}: commands of a group defined in another package (the
#: data group's threshold scores a run: it is the evaluation package's, and ``benchmark.data``
#: imports nothing above it). They are added when their group is imported.
SUBCOMMANDS: dict[str, dict[str, tuple[str, str]]] = {
    "data": {"threshold": ("benchmark.evaluation.cli", "threshold")},
}


def _imported(module_name: str, attribute: str) -> click.Command | None:
    """The command ``attribute`` of ``module_name``, imported (None when it has none)."""
    return getattr(importlib.import_module(module_name), attribute, None)


class LazyGroup(click.Group):
    """A group whose commands are imported on first use, so ``pflkit dp epsilon`` loads the
    accountant's command module and not the evaluator's, the leaderboard's or Flower's."""

    def __init__(self, *args: Any, lazy_commands: Mapping[str, tuple[str, str]], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands)

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command's name, sorted (as click lists them), none imported."""
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command ``cmd_name``, its module imported the first time (None when the module
        does not define it)."""
        if cmd_name not in self.commands and cmd_name in self.lazy_commands:
            module_name, attribute = self.lazy_commands[cmd_name]
            command = _imported(module_name, attribute)
            if command is None:
                return None
            for name, (sub_module, sub_attribute) in SUBCOMMANDS.get(cmd_name, {}).items():
                subcommand = _imported(sub_module, sub_attribute)
                if isinstance(command, click.Group) and subcommand is not None:
                    command.add_command(subcommand, name)
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)


@click.group(
    cls=LazyGroup,
    lazy_commands=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(package_name="pfl-docvqa-kit")
def main() -> None:
    """PFL-DocVQA Kit: benchmark, federated baselines, privacy accountant and scoring service."""


if __name__ == "__main__":
    main()
