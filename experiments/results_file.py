"""The data file of one results table: what a bench or an experiment measured, and where.

A results page shows a table from ``docs/results/data/NAME.json`` (its marker
``<!-- results-table: data/NAME.json -->``, rendered by ``docs/hooks/results_tables.py``, which
documents the format). The scripts write that file here, never Markdown: the columns (key,
label, alignment, format), one object per row (a plain number as a number, any other cell as the
text shown), and the provenance: date, machine, package versions and the command.

    write_results_table(out / "track1.json", columns, rows, command=command_line(module, argv))

A bench that measures one run at a time adds its rows to the table instead
(:func:`append_results_rows`): after the rows of earlier runs when the file holds a table of the
same columns, else as a new table.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import date as Date
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

#: The packages whose versions a data file records (those installed).
PACKAGES = ("pfl-docvqa-kit", "torch", "transformers")


@dataclass(frozen=True)
class Column:
    """One column of a results table.

    Attributes:
        key: the rows' key of its cells.
        label: the header.
        align: ``left`` (text) or ``right`` (figures).
        format: how a number is shown: ``int`` (thousands separators), ``.Nf``, ``+.Nf``, ``.Nfx``
            (a ratio); ``text`` and ``code`` (in backticks) for columns of text.
    """

    key: str
    label: str
    align: Literal["left", "right"] = "right"
    format: str = "text"


@dataclass(frozen=True)
class Table:
    """A results table before it is written: its columns, rows and note.

    Attributes:
        columns: the columns, in order.
        rows: one mapping per row with every column's key.
        note: a line shown above the table (what its figures are measured against).
    """

    columns: tuple[Column, ...]
    rows: list[dict[str, Any]]
    note: str | None = None

    def select(self, keys: Sequence[str]) -> Table:
        """The same table with only the columns of ``keys``, in that order."""
        by_key = {column.key: column for column in self.columns}
        rows = [{key: row[key] for key in keys} for row in self.rows]
        return Table(tuple(by_key[key] for key in keys), rows, self.note)

    def write(self, path: str | Path, *, command: str, **provenance: Any) -> Path:
        """Write it with :func:`write_results_table` (``date``, ``machine``, ``versions``)."""
        return write_results_table(
            path, self.columns, self.rows, command=command, note=self.note, **provenance
        )


def text(key: str, label: str, *, align: Literal["left", "right"] = "left") -> Column:
    """A column of text shown as it is."""
    return Column(key, label, align, "text")


def code(key: str, label: str) -> Column:
    """A column of names shown as code."""
    return Column(key, label, "left", "code")


def number(key: str, label: str, fmt: str = ".4f") -> Column:
    """A column of figures, right-aligned, numbers shown in ``fmt``."""
    return Column(key, label, "right", fmt)


def machine_description() -> str:
    """This machine: its CPU model (``/proc/cpuinfo``) and core count, or what Python knows."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()}-core {model}"


def package_versions() -> dict[str, str]:
    """Python's version and those of :data:`PACKAGES` that are installed."""
    versions = {"python": platform.python_version()}
    for package in PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            pass
    return versions


def command_line(module: str, argv: Sequence[str]) -> str:
    """``python -m MODULE ARGS...``, quoted as a shell would need it."""
    return shlex.join(["python", "-m", module, *argv])


def write_results_table(
    path: str | Path,
    columns: Sequence[Column],
    rows: Sequence[Mapping[str, Any]],
    *,
    command: str,
    date: str | None = None,
    machine: str | None = None,
    note: str | None = None,
    versions: Mapping[str, str] | None = None,
) -> Path:
    """Write a table's data file atomically (a temporary file beside it, then ``os.replace``).

    Args:
        path: the ``.json`` file to write (its folder is made).
        columns: the columns, in order.
        rows: one mapping per row with every column's key: a plain number as a number, any other
            cell as its text (``""`` for an empty cell).
        command: the command that measured the figures.
        date: ISO date of the measurement (default: today).
        machine: where it ran (default: :func:`machine_description`).
        note: a line shown above the table (what its figures are measured against).
        versions: package versions (default: :func:`package_versions`).

    Returns:
        The written path.

    Raises:
        ValueError: a row without a column's key, or with a key no column has.
    """
    keys = [column.key for column in columns]
    for index, row in enumerate(rows):
        if sorted(row) != sorted(keys):
            raise ValueError(f"row {index} has keys {sorted(row)}, the columns {keys}")
    data: dict[str, Any] = {
        "date": date or Date.today().isoformat(),
        "machine": machine or machine_description(),
        "versions": dict(package_versions() if versions is None else versions),
        "command": command,
    }
    if note:
        data["note"] = note
    data["columns"] = [asdict(column) for column in columns]
    data["rows"] = [dict(row) for row in rows]
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    descriptor, staging = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
            stream.write(to_json(data))
        os.replace(staging, target)
    except BaseException:
        Path(staging).unlink(missing_ok=True)
        raise
    return target


def to_json(data: Mapping[str, Any]) -> str:
    """The file's text: one field a line, and one line per column and per row (short diffs)."""
    lines = []
    for name, value in data.items():
        if isinstance(value, list):
            items = ",\n".join(f"  {json.dumps(item, ensure_ascii=False)}" for item in value)
            lines.append(f"{json.dumps(name)}: [\n{items}\n ]")
        else:
            lines.append(f"{json.dumps(name)}: {json.dumps(value, ensure_ascii=False)}")
    return "{\n " + ",\n ".join(lines) + "\n}\n"


def matching_table(path: str | Path, columns: Sequence[Column]) -> dict[str, Any] | None:
    """The data file at ``path`` when it holds a table of exactly ``columns`` (keys, labels,
    alignments and formats, in order); None when there is no file or it holds another table."""
    target = Path(path)
    if not target.is_file():
        return None
    data = json.loads(target.read_text(encoding="utf-8"))
    if data.get("columns") != [asdict(column) for column in columns]:
        return None
    return data


def joined_commands(earlier: str, command: str) -> str:
    """``earlier; command``: the commands of a table's runs, ``command`` once."""
    return earlier if command in earlier.split("; ") else f"{earlier}; {command}"


def append_results_rows(
    path: str | Path,
    columns: Sequence[Column],
    rows: Sequence[Mapping[str, Any]],
    *,
    command: str,
    note: str | None = None,
) -> Path:
    """Add one run's rows to the results table at ``path``.

    When the file holds a table of these columns (:func:`matching_table`), the rows come after
    its rows, its command and ``command`` are joined (:func:`joined_commands`) and its note is
    kept unless ``note`` is given; otherwise (no file, or other columns) the file becomes a new
    table of these rows. The date, machine and versions are this run's.

    Returns:
        The written path.

    Raises:
        ValueError: a row without a column's key, or with a key no column has.
    """
    earlier = matching_table(path, columns)
    if earlier is not None:
        rows = [*earlier["rows"], *rows]
        command = joined_commands(earlier["command"], command)
        note = note or earlier.get("note")
    return write_results_table(path, columns, rows, command=command, note=note)
