"""bench/startup.py walks every group and command of pflkit (the figures are printed, not tested)."""

from __future__ import annotations

import click

from bench.startup import EPSILON_ARGS, benchmark_commands, command_paths


def test_command_paths_walk_groups_recursively_and_skip_hidden_commands() -> None:
    @click.group()
    def root() -> None:
        """Root."""

    @root.group()
    def outer() -> None:
        """Outer."""

    @outer.command()
    def inner() -> None:
        """Inner."""

    @root.command(hidden=True)
    def secret() -> None:
        """Hidden."""

    assert command_paths(root) == [(), ("outer",), ("outer", "inner")]


def test_the_bench_times_every_help_the_epsilon_and_train_help() -> None:
    commands = dict(benchmark_commands())
    assert commands[("--help",)] == commands[("train", "--help")] == 0.3
    assert commands[("dp", "epsilon", "--help")] == 0.3
    assert commands[EPSILON_ARGS] == 1.0
    assert ("evaluator", "backup", "--help") in commands
