"""MkDocs hook: every results table, rendered from the data file its bench or experiment wrote.

A line ``<!-- results-table: data/NAME.json -->`` in any page (the path is relative to
``docs/results/``) is replaced by the file's table: its ``note`` (when it has one) as a
paragraph, the Markdown table of its ``columns`` and ``rows``, and a one-line provenance note
that links the file and gives its date, machine, versions and command. The files are written by
``experiments.results_file.write_results_table``; their format:

- ``date`` (ISO), ``machine`` (text), ``versions`` (package: version, may be empty),
  ``command`` (a command line, shown as code; text with backticks is shown as it is), and an
  optional ``note``;
- ``columns``: ``{"key", "label", "align": "left" | "right", "format"}``;
- ``rows``: one object per row, with every column's key and no other.

A number is shown in its column's ``format``: ``int`` (thousands separators), ``.Nf`` (N
decimals), ``+.Nf`` (signed), ``.Nfx`` (a ratio: ``4.85x``). A text is shown as it is, wrapped
in backticks in a ``code`` column; ``null`` or ``""`` is an empty cell. A missing or invalid
file, or a format not in this list, fails the build (``PluginError``) naming the page and file.
"""

from __future__ import annotations

import json
import posixpath
import re
from datetime import date
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.pages import Page

MARKER = re.compile(r"^<!-- results-table: (\S+) -->$", re.MULTILINE)
# What is left of a marker that MARKER did not match (a typo would hide a table).
LEFT_OVER = re.compile(r"<!--\s*results[-_ ]table", re.IGNORECASE)
RESULTS = "results"
NUMBER = re.compile(r"^(\+?)\.(\d)f(x?)$")
TEXT_FORMATS = ("text", "code")
ALIGN = {"left": "---", "right": "---:"}


def on_page_markdown(markdown: str, page: Page, config: Any, **_: Any) -> str:
    """Replace each results-table marker of the page with its rendered table."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        path = Path(config["docs_dir"]) / RESULTS / name
        link = posixpath.relpath(f"{RESULTS}/{name}", posixpath.dirname(page.file.src_uri) or ".")
        try:
            return render(load(path), link)
        except (OSError, ValueError) as error:
            raise PluginError(f"{page.file.src_uri}: results table {name}: {error}") from error

    markdown = MARKER.sub(replace, markdown)
    if LEFT_OVER.search(markdown):
        raise PluginError(
            f"{page.file.src_uri}: a results-table marker is not a line of its own "
            "'<!-- results-table: data/NAME.json -->'"
        )
    return markdown


def load(path: Path) -> dict[str, Any]:
    """A data file, read and checked.

    Raises:
        OSError: the file cannot be read.
        ValueError: it is not JSON or not a results table (the message says what is wrong).
    """
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    for field in ("date", "machine", "command"):
        if not isinstance(data.get(field), str) or not data[field]:
            raise ValueError(f"no {field} (a non-empty string)")
    try:
        date.fromisoformat(data["date"])
    except ValueError:
        raise ValueError(f"date {data['date']!r} is not an ISO date") from None
    versions = data.get("versions")
    if not isinstance(versions, dict) or not all(isinstance(v, str) for v in versions.values()):
        raise ValueError("versions is not an object of strings")
    if not isinstance(data.get("note", ""), str):
        raise ValueError("note is not a string")
    columns, rows = data.get("columns"), data.get("rows")
    if not isinstance(columns, list) or not columns or not isinstance(rows, list):
        raise ValueError("no columns or no rows (lists)")
    for column in columns:
        if not isinstance(column, dict) or not all(
            isinstance(column.get(field), str) for field in ("key", "label")
        ):
            raise ValueError(f"column {column!r} has no key or no label")
        if column.get("align") not in ALIGN:
            raise ValueError(f"column {column['key']}: align is not left or right")
        if not known_format(column.get("format")):
            raise ValueError(f"column {column['key']}: unknown format {column.get('format')!r}")
    keys = [column["key"] for column in columns]
    for index, row in enumerate(rows):
        if not isinstance(row, dict) or sorted(row) != sorted(keys):
            raise ValueError(f"row {index} does not have exactly the columns' keys {keys}")
    return data


def known_format(fmt: Any) -> bool:
    """Whether ``fmt`` is one of the formats a column can have."""
    return fmt in TEXT_FORMATS or fmt == "int" or bool(isinstance(fmt, str) and NUMBER.match(fmt))


def cell(value: Any, column: dict[str, str]) -> str:
    """One cell's Markdown: a number in the column's format, a text as it is (in backticks in a
    ``code`` column).

    Raises:
        ValueError: a number in a text column, a text or a fraction in an ``int`` column, or a
            value that is neither.
    """
    fmt = column["format"]
    if value is None or value == "":
        return ""
    if isinstance(value, str):
        return f"`{value}`" if fmt == "code" else value
    if isinstance(value, bool) or not isinstance(value, int | float) or fmt in TEXT_FORMATS:
        raise ValueError(f"column {column['key']}: {value!r} is not a text of a {fmt} column")
    if fmt == "int":
        if not isinstance(value, int):
            raise ValueError(f"column {column['key']}: {value!r} is not an integer")
        return f"{value:,}"
    sign, decimals, ratio = NUMBER.match(fmt).groups()  # type: ignore[union-attr]
    return f"{value:{sign}.{decimals}f}{ratio}"


def render(data: dict[str, Any], link: str) -> str:
    """The note, the Markdown table and the provenance line of a checked data file."""
    note = f"{data['note']}\n\n" if data.get("note") else ""
    return note + table(data["columns"], data["rows"]) + "\n" + provenance(data, link)


def table(columns: list[dict[str, str]], rows: list[dict[str, Any]]) -> str:
    """The Markdown table: a header, the alignment line and a line per row."""
    lines = ["| " + " | ".join(column["label"] for column in columns) + " |"]
    lines.append("| " + " | ".join(ALIGN[column["align"]] for column in columns) + " |")
    for row in rows:
        lines.append("| " + " | ".join(cell(row[c["key"]], c) for c in columns) + " |")
    return "\n".join(lines) + "\n"


def provenance(data: dict[str, Any], link: str) -> str:
    """The one-line note under a table: its data file, date, machine, versions and command."""
    versions = ", ".join(f"{name} {version}" for name, version in data["versions"].items())
    command = data["command"] if "`" in data["command"] else f"`{data['command']}`"
    return (
        f"<small>Data: [`{posixpath.basename(link)}`]({link}) · {data['date']} · machine: "
        f"{data['machine']} · versions: {versions or 'not recorded'} · command: {command}</small>"
    )
