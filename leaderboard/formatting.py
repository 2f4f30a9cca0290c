"""How numbers are shown on the pages: bytes in human units, scores, figures, times."""

from __future__ import annotations

import datetime as dt
from typing import Any

from benchmark.result_figures import Figure

_UNITS = ("B", "kB", "MB", "GB", "TB", "PB")


def human_bytes(value: int | None) -> str:
    """Bytes in decimal units with three significant digits (``44.6 GB``); ``-`` for None."""
    if value is None:
        return "-"
    amount = float(value)
    for unit in _UNITS:
        if abs(amount) < 1000 or unit == _UNITS[-1]:
            return f"{int(amount)} B" if unit == "B" else f"{amount:.3g} {unit}"
        amount /= 1000
    raise AssertionError("unreachable")


def score(value: float | None) -> str:
    """A score with four decimals; ``-`` for None."""
    return "-" if value is None else f"{value:.4f}"


def figure_value(figure: Figure, value: Any) -> str:
    """A figure's value in a table cell: a float as a score (``score``), an integer or text as
    is, a flag as yes or no; ``-`` for None."""
    if value is None:
        return "-"
    if figure.kind == "float":
        return score(value)
    if figure.kind == "bool":
        return "yes" if value else "no"
    return str(value)


def when(value: dt.datetime | None) -> str:
    """A UTC timestamp to the minute; ``-`` for None."""
    return "-" if value is None else value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
