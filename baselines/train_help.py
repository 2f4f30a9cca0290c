"""The registries' options of ``pflkit train``, and their light copy for ``pflkit train --help``.

``pflkit train`` takes ``--preset``, ``--strategy``, ``--optimizer`` and one flag per option of
every method, strategy and optimiser (:mod:`baselines.options`). The registries that list them
import every component module, and so torch, transformers and peft: about 1.3 s before any help
is printed. ``train_help.json`` beside this module holds what the command line needs of them:
the preset, strategy and optimiser names, and each option's key, flag, kind, choices and help.

:func:`registry_options` builds the click options from a description; ``pflkit train`` takes
it from the copy when it is only asked for its help (``--help``, shell completion) and from the
registries (:func:`describe_registries`) when it runs, so a stale copy could change the help,
never a run. ``tests/baselines/test_train_help.py`` fails when the copy differs from the
registries; ``python -m baselines.train_help`` rewrites it (after adding a component or an
option).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

#: the light copy of :func:`describe_registries`.
COPY = Path(__file__).with_name("train_help.json")

#: the value of a comma-separated option that names nothing (``--fully-trained none``)
NO_NAMES = "none"

_KINDS = {"int": int, "float": float, "str": str, "csv": str}


def describe_registries() -> dict[str, Any]:
    """The command-line form of the registries (imports every component, and torch).

    Returns:
        ``presets``, ``strategies`` and ``optimizers`` (names in registry order) and
        ``options`` (``key``, ``flag``, ``kind``, ``choices``, ``help`` of each, in
        :func:`baselines.config.all_option_specs` order).
    """
    from baselines.config import all_option_specs
    from baselines.optimizers import OPTIMIZERS
    from baselines.presets import all_presets
    from baselines.strategies import STRATEGIES

    return {
        "presets": list(all_presets()),
        "strategies": list(STRATEGIES),
        "optimizers": list(OPTIMIZERS),
        "options": [
            {
                "key": key,
                "flag": spec.flag,
                "kind": spec.kind,
                "choices": None if spec.choices is None else list(spec.choices),
                "help": spec.help,
            }
            for key, spec in all_option_specs().items()
        ],
    }


def read_copy(path: Path | None = None) -> dict[str, Any] | None:
    """The light copy (:data:`COPY` unless ``path``), or None when it is missing or unreadable
    (the registries then answer)."""
    try:
        description = json.loads((path or COPY).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return description if isinstance(description, dict) else None


def write_copy(path: Path | None = None) -> None:
    """Rewrite the light copy (:data:`COPY` unless ``path``) from the registries."""
    text = json.dumps(describe_registries(), indent=2, ensure_ascii=False)
    (path or COPY).write_text(text + "\n", encoding="utf-8")


def registry_options(description: dict[str, Any]) -> list[click.Parameter]:
    """``--preset``/``--method``, ``--strategy``, ``--optimizer`` and one flag per option.

    Args:
        description: :func:`describe_registries` or its copy.

    Returns:
        The click options, in help order.
    """
    presets = ", ".join(description["presets"])
    params: list[click.Parameter] = [
        click.Option(
            ["--preset", "preset"], metavar="NAME", help=f"Preset recipe: one of {presets}."
        ),
        click.Option(
            ["--method", "method_alias"],
            metavar="NAME",
            help="Alias of --preset (the kit's first name for it).",
        ),
        click.Option(
            ["--strategy"], help=f"Server strategy: one of {', '.join(description['strategies'])}."
        ),
        click.Option(
            ["--optimizer"], help=f"Local optimiser: one of {', '.join(description['optimizers'])}."
        ),
    ]
    for spec in description["options"]:
        if spec["kind"] == "switch":
            params.append(
                click.Option([spec["flag"], spec["key"]], is_flag=True, default=None,
                             help=spec["help"])
            )  # fmt: skip
        else:
            kind = click.Choice(spec["choices"]) if spec["choices"] else _KINDS[spec["kind"]]
            text = (
                f"{spec['help']} ({NO_NAMES}: no name)" if spec["kind"] == "csv" else spec["help"]
            )
            params.append(click.Option([spec["flag"], spec["key"]], type=kind, help=text))
    return params


if __name__ == "__main__":
    write_copy()
    click.echo(f"wrote {COPY}")
