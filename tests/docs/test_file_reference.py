"""The files reference's tables of keys (docs/reference/files.md), generated when the site is built
by ``docs/hooks/file_formats.py`` from the schemas that enforce each format.

Every key of every schema is read from the schema itself, so a field added later is listed, or
fails the hook when it has no description; the ``required`` column is checked against what the
readers refuse. Nothing here builds the site (``test_built_site.py`` does).
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from mkdocs.exceptions import PluginError
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "reference" / "files.md"
KEY = re.compile(r"`([^`]+)`")


@pytest.fixture(scope="module")
def hook() -> ModuleType:
    """``docs/hooks/file_formats.py``, loaded as MkDocs loads a hook (a file, not a package)."""
    path = ROOT / "docs" / "hooks" / "file_formats.py"
    spec = importlib.util.spec_from_file_location("file_formats_hook", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rows(table: str) -> dict[str, list[str]]:
    """A generated Markdown table's rows by key (a row that lists several keys under each)."""
    found: dict[str, list[str]] = {}
    for line in table.splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        for key in KEY.findall(cells[0]):
            found[key] = cells[1:]
    return found


def model_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every field of a pydantic model, a nested model's as ``parent.child``."""
    keys = []
    for name, field in model.model_fields.items():
        keys.append(prefix + name)
        for arg in (*getattr(field.annotation, "__args__", ()), field.annotation):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                keys += model_keys(arg, f"{prefix}{name}.")
    return keys


def files_page() -> SimpleNamespace:
    return SimpleNamespace(file=SimpleNamespace(src_uri="reference/files.md"))


# --- every key of every schema is in its table ------------------------------------------------


def test_submission_json_lists_every_field_of_the_schema(hook: ModuleType) -> None:
    from evaluator.submission_metadata import OTHER_KEYS, SubmissionMetadata

    checked = rows(hook.submission_table())
    keys = model_keys(SubmissionMetadata)
    assert {"track", "personal.log_round", "pretraining.clients_per_round"} <= set(keys)
    assert list(checked) == keys
    for key, (kind, required, *_) in checked.items():
        assert kind and (required in ("yes", "no") or required.startswith("no (default")), key
    assert checked["method"][:3] == ["string", "yes", "1 to 200 characters"]
    assert checked["family"][1] == 'no (default `"vt5"`)'
    assert checked["sampling"][2] == "`fixed` or `poisson`"
    other = rows(hook.submission_other_table())
    assert list(other) == [key for keys in OTHER_KEYS for key in keys]
    assert not set(other) & set(keys), "a key is both in the schema and among the other keys"


def test_privacy_json_lists_every_key_the_declaration_requires(hook: ModuleType) -> None:
    from accountant.declaration import FIELDS

    table = rows(hook.privacy_table())
    assert list(table) == list(FIELDS)
    assert table["epsilon"][0] == "number" and table["clients"][0] == "integer"
    assert table["rounds"][2].startswith("1 to 1,000,000")


def test_recipe_json_lists_format_and_every_field_of_the_recipe(hook: ModuleType) -> None:
    from benchmark.recipe import Recipe

    table = rows(hook.recipe_table())
    fields = dataclasses.fields(Recipe)
    assert all(field.metadata.get("key") for field in fields), "a Recipe field names no key"
    assert list(table) == ["format", *(field.metadata["key"] for field in fields)]


def test_communication_log_jsonl_lists_every_key_the_engine_writes(hook: ModuleType) -> None:
    from baselines.core.communication_log import MessageRecord
    from benchmark.communication_log import DETAILS_KEYS

    table = rows(hook.details_table())
    record = MessageRecord(1, -1, 0, 8, 40, "fp32", "down", "0" * 64, ("w",))
    assert list(table) == [field.name for field in dataclasses.fields(MessageRecord)]
    assert set(table) == set(json.loads(record.to_json())), "a key written is not a field"
    assert {key for key, cells in table.items() if cells[1] == "yes"} == set(DETAILS_KEYS)


def test_communication_log_csv_lists_every_column_in_order(hook: ModuleType) -> None:
    from benchmark.communication_log import HEADER

    assert list(rows(hook.csv_table())) == list(HEADER)


# --- the required column is what the readers refuse ------------------------------------------


def valid_recipe() -> dict[str, Any]:
    return {"format": 1, "config": {"preset": "fedavg", "seed": 0},
            "base": {"name": "base", "sha256": "a" * 64}, "data": {"fingerprint": "b" * 64},
            "kit": {"version": "0.1.0", "source_sha256": "c" * 64},
            "machine": {"label": "x86-1", "threads": 2, "device": "cpu"},
            "files": {"baselines/methods/mine.py": "x = 1\n"}}  # fmt: skip


def test_recipe_json_required_keys_are_those_the_reader_refuses_without(hook: ModuleType) -> None:
    from benchmark.recipe import RecipeError, parse_recipe

    assert parse_recipe(json.dumps(valid_recipe()).encode()).files
    for key, cells in rows(hook.recipe_table()).items():
        recipe = copy.deepcopy(valid_recipe())
        *parents, last = key.split(".")
        section = recipe
        for parent in parents:
            section = section[parent]
        del section[last]
        raw = json.dumps(recipe).encode()
        if cells[1] == "yes":
            with pytest.raises(RecipeError):
                parse_recipe(raw)
        else:
            parse_recipe(raw)


def test_privacy_json_every_key_is_required_by_the_validator(hook: ModuleType) -> None:
    from accountant.declaration import DeclarationError, parse_declaration

    valid = {"epsilon": 1, "delta": 1e-5, "noise_multiplier": 1.1, "clipping_norm": 0.5,
             "rounds": 5, "clients": 10, "clients_per_round": 2, "providers_per_round": 50,
             "min_providers": 400, "sampling": "poisson", "analysis": "competition",
             "unit": "provider"}  # fmt: skip
    parse_declaration(valid)
    for key in rows(hook.privacy_table()):
        with pytest.raises(DeclarationError) as refused:
            parse_declaration({k: v for k, v in valid.items() if k != key})
        assert refused.value.field == key


# --- the hook and the page -------------------------------------------------------------------


def test_the_page_gets_every_table_and_keeps_no_marker(hook: ModuleType) -> None:
    markdown = PAGE.read_text(encoding="utf-8")
    for name in hook.TABLES:
        assert f"<!-- file-keys: {name} -->" in markdown, name
    built = hook.on_page_markdown(markdown, files_page())
    assert "file-keys" not in built
    assert "| `personal.log_round` |" in built and "| `machine.threads` |" in built
    other = SimpleNamespace(file=SimpleNamespace(src_uri="index.md"))
    assert hook.on_page_markdown(markdown, other) == markdown


def test_a_missing_or_unknown_marker_fails_the_hook(hook: ModuleType) -> None:
    markdown = PAGE.read_text(encoding="utf-8")
    with pytest.raises(PluginError, match="privacy.json"):
        hook.on_page_markdown(markdown.replace("<!-- file-keys: privacy.json -->", ""),
                              files_page())  # fmt: skip
    with pytest.raises(PluginError, match="metrics.jsonl"):
        hook.on_page_markdown(markdown + "\n<!-- file-keys: metrics.jsonl -->\n", files_page())


def _undocumented_submission_field(monkeypatch: pytest.MonkeyPatch) -> None:
    import evaluator.submission_metadata as schema

    class Later(schema.SubmissionMetadata):
        added: int = 0

    monkeypatch.setattr(schema, "SubmissionMetadata", Later)


def _undocumented_nested_field(monkeypatch: pytest.MonkeyPatch) -> None:
    import evaluator.submission_metadata as schema

    class Personal(schema.PersonalMetadata):
        added: int = 0

    class Later(schema.SubmissionMetadata):
        personal: Personal | None = schema.SubmissionMetadata.model_fields["personal"]

    monkeypatch.setattr(schema, "SubmissionMetadata", Later)


def _undocumented_other_key(monkeypatch: pytest.MonkeyPatch) -> None:
    import evaluator.submission_metadata as schema

    monkeypatch.setattr(schema, "OTHER_KEYS", {**schema.OTHER_KEYS, ("added",): ("", "")})


def _undocumented_privacy_key(monkeypatch: pytest.MonkeyPatch) -> None:
    import accountant.declaration as declaration

    @dataclasses.dataclass(frozen=True)
    class Later(declaration.PrivacyDeclaration):
        added: int = 0

    monkeypatch.setattr(declaration, "PrivacyDeclaration", Later)
    monkeypatch.setattr(declaration, "FIELDS", (*declaration.FIELDS, "added"))


def _undocumented_recipe_field(monkeypatch: pytest.MonkeyPatch) -> None:
    import benchmark.recipe as recipe

    @dataclasses.dataclass(frozen=True)
    class Later(recipe.Recipe):
        added: int = 0

    monkeypatch.setattr(recipe, "Recipe", Later)


def _undocumented_message_key(monkeypatch: pytest.MonkeyPatch) -> None:
    import baselines.core.communication_log as log

    @dataclasses.dataclass(frozen=True)
    class Later(log.MessageRecord):
        added: int = 0

    monkeypatch.setattr(log, "MessageRecord", Later)


def _unchecked_required_key(monkeypatch: pytest.MonkeyPatch) -> None:
    import evaluator.validation.commdetails as commdetails

    checks = {key: text for key, text in commdetails.CHECKS.items() if key != "parameters"}
    monkeypatch.setattr(commdetails, "CHECKS", checks)


def _undocumented_csv_column(monkeypatch: pytest.MonkeyPatch) -> None:
    import benchmark.communication_log as log

    monkeypatch.setattr(log, "HEADER", (*log.HEADER, "added"))


@pytest.mark.parametrize("undocument", [
    _undocumented_submission_field, _undocumented_nested_field, _undocumented_other_key,
    _undocumented_privacy_key, _undocumented_recipe_field, _undocumented_message_key,
    _unchecked_required_key, _undocumented_csv_column,
])  # fmt: skip
def test_a_key_without_a_description_fails_the_hook(
    hook: ModuleType, monkeypatch: pytest.MonkeyPatch, undocument: Any
) -> None:
    markdown = PAGE.read_text(encoding="utf-8")
    hook.on_page_markdown(markdown, files_page())
    undocument(monkeypatch)
    with pytest.raises(PluginError, match="added|parameters"):
        hook.on_page_markdown(markdown, files_page())


def test_a_constraint_the_hook_cannot_show_fails_it(hook: ModuleType) -> None:
    from pydantic import Field

    class Pattern(BaseModel):
        name: str = Field(pattern="^[a-z]+$", description="a name")

    with pytest.raises(PluginError, match="name"):
        hook.model_rows(Pattern, "example.json")
