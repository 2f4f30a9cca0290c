"""MkDocs hook: the reference figures that pages quote in prose, from one data file.

A few figures are quoted on many pages: the track-1 threshold in force, the shipped base's and
the ``fedavg`` preset's ANLS, the demo's scores, VT5-base's parameter count, the audit's
ceilings. Each is a row of ``docs/results/data/reference_figures.json`` (a results table, shown
on the results index with every figure's source, date and command): ``name`` and ``value``, the
value as it is displayed. A page quotes a figure as ``{{ figure.NAME }}``, e.g.
``{{ figure.threshold }}``, and this hook, run after ``results_tables.py`` (so a data file's
note may quote one too), writes the value in its place, in prose, tables and code alike (the
site has no macros plugin, and neither Python-Markdown, pymdownx nor mkdocstrings gives the
braces a meaning). A name the file does not hold, or a marker this hook cannot read, fails the
build (``PluginError``) naming the page.

``tests/docs/test_reference_figures.py`` checks the file against the data files the figures
come from, and that no page writes one of the values where it means the figure.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.pages import Page

#: the data file, relative to the docs folder
FIGURES = "results/data/reference_figures.json"
MARKER = re.compile(r"\{\{ figure\.([a-z][a-z0-9_]*) \}\}")
# What is left of a marker that MARKER did not match (a typo would show the braces).
LEFT_OVER = re.compile(r"\{\{\s*figure\b")


def on_page_markdown(markdown: str, page: Page, config: Any, **_: Any) -> str:
    """Replace each figure marker of the page with the figure's value."""
    if "{{" not in markdown:
        return markdown
    try:
        figures = load(Path(config["docs_dir"]) / FIGURES)
    except (OSError, ValueError) as error:
        raise PluginError(f"{FIGURES}: {error}") from error

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in figures:
            raise PluginError(f"{page.file.src_uri}: no reference figure {name!r} in {FIGURES}")
        return figures[name]

    markdown = MARKER.sub(replace, markdown)
    if LEFT_OVER.search(markdown):
        raise PluginError(
            f"{page.file.src_uri}: a figure marker is not '{{{{ figure.NAME }}}}' "
            "(NAME in lower case, one space inside each pair of braces)"
        )
    return markdown


def load(path: Path) -> dict[str, str]:
    """The figures of the data file: name -> value as displayed.

    Raises:
        OSError: the file cannot be read.
        ValueError: it is not JSON, a row has no name or no value (texts), or a name repeats.
    """
    data = json.loads(path.read_text(encoding="utf-8"))
    rows = data.get("rows") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise ValueError("no rows (a list)")
    figures: dict[str, str] = {}
    for index, row in enumerate(rows):
        name, value = (row.get("name"), row.get("value")) if isinstance(row, dict) else (0, 0)
        if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", name):
            raise ValueError(f"row {index}: the name {name!r} is not a lower-case identifier")
        if not isinstance(value, str) or not value:
            raise ValueError(f"row {index} ({name}): the value is not a non-empty text")
        if name in figures:
            raise ValueError(f"row {index}: {name} is named twice")
        figures[name] = value
    return figures
