"""MkDocs hook: the keys of the files a participant writes, from the code that writes and checks
them, built when the site is.

Each ``<!-- file-keys: NAME -->`` line of ``docs/reference/files.md`` is replaced by the table of
NAME's keys (:data:`TABLES`): their names, types, whether they are required, their limits and
what each holds, read from the schema that enforces the format and from the descriptions beside
its fields:

- ``submission.json``: ``evaluator.submission_metadata.SubmissionMetadata`` (a pydantic model:
  each field's ``description`` and its ``json_schema_extra["checked"]``; the fields of a nested
  model as ``parent.child``), and ``submission.json, other keys`` its ``OTHER_KEYS``, the keys
  ``pflkit train`` writes that the schema keeps as they are;
- ``privacy.json``: the keys ``accountant.declaration.FIELDS`` that ``parse_declaration``
  requires, described by the fields of ``PrivacyDeclaration`` (``metadata["help"]``, ``["rule"]``);
- ``recipe.json``: ``benchmark.recipe.FORMAT_KEY`` and the fields of ``Recipe`` (each with its
  key in the file, ``metadata["key"]``);
- ``communication_log.jsonl``: the fields of ``baselines.core.communication_log.MessageRecord``
  (every key the engine writes), required when in ``benchmark.communication_log.DETAILS_KEYS``,
  with what the evaluator's reader checks (``evaluator.validation.commdetails.CHECKS``);
- ``communication_log.csv``: ``benchmark.communication_log.HEADER`` and ``COLUMNS``.

A marker missing from the page, an unknown marker, or a key without its description fails the
build (``PluginError``): a field added to a schema without a description cannot reach the site
undocumented.
"""

from __future__ import annotations

import dataclasses
import json
import re
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any, Literal, Union

from mkdocs.exceptions import PluginError
from mkdocs.structure.pages import Page
from pydantic import BaseModel
from pydantic.fields import FieldInfo

PAGE = "reference/files.md"
MARKER = re.compile(r"<!-- file-keys: ([^>]+?) -->")
Row = tuple[str, ...]
#: the pydantic constraints shown in the limits column (any other fails the hook)
BOUNDS = ("ge", "gt", "le", "lt", "min_length", "max_length")


def on_page_markdown(markdown: str, page: Page, **_: Any) -> str:
    """Replace each ``<!-- file-keys: NAME -->`` line of the files page with NAME's table."""
    if page.file.src_uri != PAGE:
        return markdown
    found = MARKER.findall(markdown)
    unknown = sorted(set(found) - set(TABLES))
    if unknown:
        raise PluginError(f"{PAGE}: no table of file keys is named {', '.join(unknown)} "
                          f"(known: {', '.join(TABLES)})")  # fmt: skip
    missing = [name for name in TABLES if name not in found]
    if missing:
        raise PluginError(f"{PAGE} lost its <!-- file-keys: {missing[0]} --> line: the table of "
                          f"{missing[0]}'s keys goes there")  # fmt: skip
    return MARKER.sub(lambda match: TABLES[match.group(1)](), markdown)


# --- the tables ------------------------------------------------------------------------------


def submission_table() -> str:
    """``submission.json``'s keys that the evaluator's schema validates."""
    from evaluator.submission_metadata import SubmissionMetadata

    header = ("key", "type", "required", "limits", "written by `pflkit train`",
              "checked by the evaluator")  # fmt: skip
    return table(header, model_rows(SubmissionMetadata, "submission.json"))


def submission_other_table() -> str:
    """The other keys ``pflkit train`` writes in ``submission.json``, kept as written."""
    from evaluator.submission_metadata import OTHER_KEYS

    rows = [(_keys(keys), *texts) for keys, texts in OTHER_KEYS.items()]
    for row in rows:
        if not all(row[1:]):
            raise PluginError(f"submission.json: the keys {row[0]} have no description "
                              "(evaluator.submission_metadata.OTHER_KEYS)")  # fmt: skip
    return table(("key", "written by `pflkit train`", "used by the evaluator"), rows)


def privacy_table() -> str:
    """``privacy.json``'s keys: every one is required (``parse_declaration``)."""
    from accountant.declaration import FIELDS, PrivacyDeclaration

    fields = {field.name: field for field in dataclass_fields(PrivacyDeclaration)}
    hints = typing.get_type_hints(PrivacyDeclaration)
    rows = []
    for name in FIELDS:
        if name not in fields:
            raise PluginError(f"privacy.json: {name} is not a field of PrivacyDeclaration")
        help_, rule = described(fields[name], "privacy.json", "help", "rule")
        rows.append((_keys([name]), json_type(hints[name]), help_, rule))
    return table(("key", "type", "value", "rule"), rows)


def recipe_table() -> str:
    """``recipe.json``'s keys: ``format`` and those ``parse_recipe`` keeps in a ``Recipe``."""
    from benchmark.recipe import FORMAT, FORMAT_KEY, Recipe

    hints = typing.get_type_hints(Recipe)
    rows = [(_keys(["format"]), json_type(type(FORMAT)), "yes", FORMAT_KEY[1], FORMAT_KEY[0])]
    for field in dataclass_fields(Recipe):
        key, help_, limits = described(field, "recipe.json", "key", "help", "limits")
        required = field.metadata.get("required")
        if not isinstance(required, bool):
            raise PluginError(f"recipe.json: the field {field.name} does not say whether it is "
                              "required (metadata 'required')")  # fmt: skip
        rows.append((_keys([key]), json_type(hints[field.name]), _yes(required), limits, help_))
    return table(("key", "type", "required", "limits", "value"), rows)


def details_table() -> str:
    """``communication_log.jsonl``'s keys: each field of the engine's ``MessageRecord``; the
    evaluator requires ``DETAILS_KEYS`` and checks them (``commdetails.CHECKS``)."""
    from baselines.core.communication_log import MessageRecord
    from benchmark.communication_log import DETAILS_KEYS
    from evaluator.validation.commdetails import CHECKS

    fields = dataclass_fields(MessageRecord)
    written = {field.name for field in fields}
    for key in DETAILS_KEYS:
        if key not in written:
            raise PluginError(f"communication_log.jsonl: the evaluator requires {key}, which "
                              "MessageRecord does not write")  # fmt: skip
        if not CHECKS.get(key):
            raise PluginError(f"communication_log.jsonl: the evaluator's check of {key} is not "
                              "described (evaluator.validation.commdetails.CHECKS)")  # fmt: skip
    hints = typing.get_type_hints(MessageRecord)
    rows = [(_keys([field.name]), json_type(hints[field.name]), _yes(field.name in DETAILS_KEYS),
             CHECKS.get(field.name, "not checked on upload"),
             described(field, "communication_log.jsonl", "help")[0])
            for field in fields]  # fmt: skip
    return table(("key", "type", "required", "checked by the evaluator", "value"), rows)


def csv_table() -> str:
    """``communication_log.csv``'s columns, in order."""
    from benchmark.communication_log import COLUMNS, HEADER

    rows = []
    for column in HEADER:
        if not COLUMNS.get(column):
            raise PluginError(f"communication_log.csv: the column {column} has no description "
                              "(benchmark.communication_log.COLUMNS)")  # fmt: skip
        rows.append((_keys([column]), COLUMNS[column]))
    return table(("column", "value"), rows)


#: marker name -> the function that writes its table
TABLES: dict[str, Callable[[], str]] = {
    "submission.json": submission_table,
    "submission.json, other keys": submission_other_table,
    "privacy.json": privacy_table,
    "recipe.json": recipe_table,
    "communication_log.jsonl": details_table,
    "communication_log.csv": csv_table,
}


# --- reading the schemas ---------------------------------------------------------------------


def model_rows(model: type[BaseModel], file: str, prefix: str = "") -> list[Row]:
    """One row per field of a pydantic model, each nested model's fields after their parent.

    Args:
        model: the schema.
        file: the file it checks, for the errors.
        prefix: the parent's key and a dot, for a nested model.

    Returns:
        ``(key, type, required, limits, description, checked)`` rows.

    Raises:
        PluginError: a field without a ``description``.
    """
    rows: list[Row] = []
    for name, field in model.model_fields.items():
        key = prefix + (field.alias or name)
        if not field.description:
            raise PluginError(f"{file}: the field {key} of {model.__name__} has no description "
                              "(Field(description=...))")  # fmt: skip
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        checked = str(extra.get("checked", "")) or "its type and limits"
        rows.append((_keys([key]), json_type(field.annotation), _required(field),
                     pydantic_limits(field, file, key), field.description, checked))  # fmt: skip
        for nested in _models(field.annotation):
            rows.extend(model_rows(nested, file, f"{key}."))
    return rows


def dataclass_fields(cls: type) -> list[dataclasses.Field]:
    """The fields of a dataclass schema (its fields of ``init``)."""
    return [field for field in dataclasses.fields(cls) if field.init]


def described(field: dataclasses.Field, file: str, *names: str) -> tuple[str, ...]:
    """The texts ``names`` of a dataclass field's ``metadata``.

    Raises:
        PluginError: one is missing or empty.
    """
    texts = tuple(field.metadata.get(name) for name in names)
    for name, text in zip(names, texts, strict=True):
        if not isinstance(text, str) or not text:
            raise PluginError(f"{file}: the field {field.name} has no {name!r} in its metadata: "
                              "describe it beside the field")  # fmt: skip
    return typing.cast(tuple[str, ...], texts)


def json_type(annotation: Any) -> str:
    """A Python annotation as the JSON type of the value: ``int | None`` is ``integer or
    `null```, ``tuple[str, ...]`` a ``list of strings``, a model or a dict an ``object``."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (Union, types.UnionType):
        kinds = list(dict.fromkeys(json_type(arg) for arg in args if arg is not type(None)))
        if set(kinds) == {"integer", "number"}:
            kinds = ["number"]
        return " or ".join(kinds + (["`null`"] if type(None) in args else []))
    if origin is Literal:
        return json_type(type(args[0]))
    if origin in (tuple, list):
        return f"list of {json_type(args[0])}s"
    if origin is dict or annotation is dict or _is_model(annotation):
        return "object"
    names = {bool: "boolean", int: "integer", float: "number", str: "string"}
    if annotation not in names:
        raise PluginError(f"no JSON type is known for the annotation {annotation!r}")
    return names[annotation]


def pydantic_limits(field: FieldInfo, file: str, key: str) -> str:
    """A pydantic field's constraints and allowed values in words (``1 to 200 characters``).

    Raises:
        PluginError: a constraint this hook cannot show, so that none is left off silently.
    """
    bounds: dict[str, Any] = {}
    for constraint in field.metadata:
        shown = {name: getattr(constraint, name) for name in BOUNDS
                 if getattr(constraint, name, None) is not None}  # fmt: skip
        if not shown:
            raise PluginError(f"{file}: the constraint {constraint!r} of {key} cannot be shown")
        bounds.update(shown)
    parts = []
    values = [value for arg in _flat(field.annotation) if typing.get_origin(arg) is Literal
              for value in typing.get_args(arg)]  # fmt: skip
    if values:
        parts.append(" or ".join(f"`{value}`" for value in values))
    low = _bound(bounds, "ge", ">=") or _bound(bounds, "gt", ">")
    high = _bound(bounds, "le", "<=") or _bound(bounds, "lt", "<")
    if "ge" in bounds and "le" in bounds:
        parts.append(f"{bounds['ge']:,} to {bounds['le']:,}")
    else:
        parts.extend(bound for bound in (low, high) if bound)
    shortest, longest = bounds.get("min_length"), bounds.get("max_length")
    if shortest is not None and longest is not None:
        parts.append(f"{shortest:,} to {longest:,} characters")
    elif longest is not None:
        parts.append(f"at most {longest:,} characters")
    elif shortest is not None:
        parts.append(f"at least {shortest:,} characters")
    return "; ".join(parts) or "—"


def table(header: Sequence[str], rows: Sequence[Row]) -> str:
    """A Markdown table; consecutive rows that differ only in their key share one row."""
    merged: list[list[str]] = []
    for row in rows:
        if merged and tuple(merged[-1][1:]) == tuple(row[1:]):
            merged[-1][0] += f", {row[0]}"
        else:
            merged.append(list(row))
    for row in merged:
        for cell in row:
            if "|" in cell or "\n" in cell:
                raise PluginError(f"a cell of the files page's row {row[0]} holds a '|' or a "
                                  f"line break, which would break its table: {cell!r}")  # fmt: skip
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in merged]
    return "\n".join(lines) + "\n"


def _keys(keys: Sequence[str]) -> str:
    """Keys as inline code, separated by commas."""
    return ", ".join(f"`{key}`" for key in keys)


def _yes(required: bool) -> str:
    return "yes" if required else "no"


def _required(field: FieldInfo) -> str:
    """``yes``, or ``no`` with the default when there is one other than ``null``."""
    if field.is_required():
        return "yes"
    if field.default is None:
        return "no"
    return f"no (default `{json.dumps(field.default)}`)"


def _bound(bounds: dict[str, Any], name: str, sign: str) -> str:
    return f"{sign} {bounds[name]:,}" if name in bounds else ""


def _flat(annotation: Any) -> list[Any]:
    """The members of a union annotation, or the annotation alone."""
    if typing.get_origin(annotation) in (Union, types.UnionType):
        return list(typing.get_args(annotation))
    return [annotation]


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models a field's annotation holds (``PersonalMetadata | None``)."""
    return [arg for arg in _flat(annotation) if _is_model(arg)]
