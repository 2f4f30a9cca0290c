"""The recipe file, ``recipe.json``: its fields, its bounds and its one strict reader.

``pflkit train`` writes it (``baselines.recipe``), ``pflkit train --recipe`` and the evaluator's
re-run (``evaluator.reproduction``) read it through :func:`parse_recipe`, which refuses anything
the bounds below do not allow: it is an untrusted upload. What each field holds is said in
``baselines.recipe``; why it stays secret too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from benchmark.strict_json import JsonLimits, JsonRefused, parse_json_object
from benchmark.submission_contract import RECIPE_FILE

__all__ = ["FORMAT", "RECIPE_FILE", "Recipe", "RecipeError", "parse_recipe"]
FORMAT = 1
#: a recipe's largest size (its component files are most of it)
MAX_RECIPE_BYTES = 2 * 1024 * 1024
#: the participant's files it may carry: one-file components of the kit's seams
BUNDLE_PATH = re.compile(r"^baselines/(methods|strategies|optimizers|wire)/[a-z_][a-z0-9_]{0,63}\.py$")
MAX_BUNDLE_FILES = 8
MAX_BUNDLE_FILE_CHARS = 256 * 1024
_LIMITS = JsonLimits(max_depth=4, max_number_chars=32, max_keys=256)
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class RecipeError(ValueError):
    """A recipe that cannot be read: the message says what is wrong."""


#: ``format``, the key checked and not kept: what it holds and its limit (the keys kept are
#: ``Recipe``'s fields).
FORMAT_KEY = ("the recipe's format", f"must be {FORMAT}")
_TEXT = "1 to 512 characters"
_HEX = "a SHA-256 in hex"


def _key(key: str, help: str, limits: str, *, required: bool = True) -> Any:
    """A key of recipe.json as a field of ``Recipe``, for the files reference
    (docs/reference/files.md).

    Args:
        key: the key in the file (``base.name``: ``name`` in the object ``base``).
        help: what it holds.
        limits: what ``parse_recipe`` requires of its value.
        required: whether ``parse_recipe`` refuses a recipe without it.

    Returns:
        A ``dataclasses.field`` without a default, with that ``metadata``.
    """
    return field(metadata={"key": key, "help": help, "limits": limits, "required": required})


@dataclass(frozen=True)
class Recipe:
    """A parsed recipe (the fields of ``baselines.recipe``)."""

    config: dict[str, Any] = _key(
        "config", "the whole training configuration with its preset and its seed",
        "an object with a string `preset`",
    )  # fmt: skip
    base_name: str = _key(
        "base.name", "the checkpoint every party starts from (`base` for the shipped one)", _TEXT
    )
    base_sha256: str = _key("base.sha256", "the SHA-256 of its weights", _HEX)
    data_fingerprint: str = _key("data.fingerprint", "the fingerprint of the training files", _HEX)
    kit_version: str = _key("kit.version", "the kit's package version", _TEXT)
    kit_source_sha256: str = _key("kit.source_sha256", "the digest of its Python sources", _HEX)
    machine_label: str = _key("machine.label", "the CPU pins' label of the machine type", _TEXT)
    threads: int = _key("machine.threads", "torch's threads", "1 to 1024")
    device: str = _key("machine.device", "the device", _TEXT)
    files: dict[str, str] = _key(
        "files", "the source of the one-file components the run used from "
        "`baselines/methods/`, `strategies/`, `optimizers/` or `wire/`, by path",
        f"at most {MAX_BUNDLE_FILES} files, each at most {MAX_BUNDLE_FILE_CHARS:,} characters",
        required=False,
    )  # fmt: skip

    @property
    def preset(self) -> str:
        """The preset the run was trained with."""
        return str(self.config.get("preset"))


def _section(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key)
    if not isinstance(value, Mapping):
        raise RecipeError(f"recipe: {key!r} must be an object")
    return value


def _text(section: Mapping[str, Any], key: str, where: str, pattern: re.Pattern | None = None
          ) -> str:  # fmt: skip
    value = section.get(key)
    if not isinstance(value, str) or not value or len(value) > 512:
        raise RecipeError(f"recipe: {where}.{key} must be a string of 1 to 512 characters")
    if pattern is not None and not pattern.fullmatch(value):
        raise RecipeError(f"recipe: {where}.{key} must be a SHA-256 in hex")
    return value


def _files(raw: Any) -> dict[str, str]:
    if not isinstance(raw, Mapping) or len(raw) > MAX_BUNDLE_FILES:
        raise RecipeError(f"recipe: files must be an object of at most {MAX_BUNDLE_FILES} files")
    for path, source in raw.items():
        if not BUNDLE_PATH.fullmatch(path):
            raise RecipeError(
                f"recipe: file {path!r} is not a one-file component "
                "(baselines/methods|strategies|optimizers|wire/NAME.py)"
            )
        if not isinstance(source, str) or len(source) > MAX_BUNDLE_FILE_CHARS:
            raise RecipeError(
                f"recipe: file {path!r} must be text of at most {MAX_BUNDLE_FILE_CHARS} characters"
            )
    return dict(raw)


def parse_recipe(raw: bytes) -> Recipe:
    """Read an untrusted ``recipe.json``.

    Raises:
        RecipeError: too large, not strict JSON, another format, or a field missing or out of
            its bounds.
    """
    if len(raw) > MAX_RECIPE_BYTES:
        raise RecipeError(f"recipe: larger than {MAX_RECIPE_BYTES} bytes")
    try:
        data = parse_json_object(raw, limits=_LIMITS)
    except JsonRefused as error:
        raise RecipeError(f"recipe: {error}") from None
    if data.get("format") != FORMAT:
        raise RecipeError(f"recipe: format must be {FORMAT}; re-train with this kit")
    config = data.get("config")
    if not isinstance(config, dict) or not isinstance(config.get("preset"), str):
        raise RecipeError("recipe: config must be a training configuration with a preset")
    base, kit, machine = _section(data, "base"), _section(data, "kit"), _section(data, "machine")
    threads = machine.get("threads")
    if not isinstance(threads, int) or isinstance(threads, bool) or not 1 <= threads <= 1024:
        raise RecipeError("recipe: machine.threads must be an integer from 1 to 1024")
    return Recipe(
        config=config,
        base_name=_text(base, "name", "base"),
        base_sha256=_text(base, "sha256", "base", _SHA256),
        data_fingerprint=_text(_section(data, "data"), "fingerprint", "data", _SHA256),
        kit_version=_text(kit, "version", "kit"),
        kit_source_sha256=_text(kit, "source_sha256", "kit", _SHA256),
        machine_label=_text(machine, "label", "machine"),
        threads=threads,
        device=_text(machine, "device", "machine"),
        files=_files(data.get("files", {})),
    )
