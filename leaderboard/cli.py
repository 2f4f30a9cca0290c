"""Command-line group of the `leaderboard` package (wired into `pflkit` by pflkit/cli.py)."""

from __future__ import annotations
