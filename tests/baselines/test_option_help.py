"""Every option declares its help as data: field metadata, never a docstring's layout.

``pflkit train --help`` shows the ``help`` each options field declares (``option(DEFAULT,
help=...)``, or ``dataclasses.field(default=..., metadata={"help": ...})`` as peft does);
a field without one is refused by name. An options class the API reference renders
(``docs/reference/*.md``) keeps an ``Attributes:`` section for it, which must say the same.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import pytest

from baselines.fsp.options import PretrainingPhase
from baselines.methods import METHODS
from baselines.optimizers import OPTIMIZERS
from baselines.options import option, option_specs
from baselines.strategies import STRATEGIES

ROOT = Path(__file__).resolve().parents[2]


def _option_classes() -> list[type]:
    """Every options class of every registered component, once, in registry order."""
    components = [*METHODS.values(), *STRATEGIES.values(), *OPTIMIZERS.values(), PretrainingPhase]
    return list(dict.fromkeys(cls for c in components for cls in c.option_classes))


def _undeclared(cls: type) -> list[str]:
    """The fields of an options class that declare no help."""
    return [
        f"{cls.__module__}.{cls.__name__}.{field.name}"
        for field in dataclasses.fields(cls)
        if not str(field.metadata.get("help") or "").strip()
    ]


def test_every_option_declares_its_help() -> None:
    missing = [name for cls in _option_classes() for name in _undeclared(cls)]
    assert not missing, f"options without a declared help (option(..., help=...)): {missing}"
    for cls in _option_classes():  # the command line shows the declared help
        declared = {field.name: field.metadata["help"] for field in dataclasses.fields(cls)}
        assert {spec.field: spec.help for spec in option_specs(cls)} == declared


def test_an_option_without_help_is_refused_by_name() -> None:
    @dataclass(frozen=True)
    class ToyOptions:
        """Options of a toy.

        Attributes:
            rate: documented here only, which the command line does not read.
        """

        rate: float = 0.5

    assert _undeclared(ToyOptions) == [f"{__name__}.ToyOptions.rate"]
    with pytest.raises(TypeError, match=r"ToyOptions\.rate declares no help"):
        option_specs(ToyOptions)
    with pytest.raises(TypeError, match="help"):
        option(0.5)  # the short form needs it


def test_help_is_read_from_the_metadata_in_either_form() -> None:
    @dataclass(frozen=True)
    class ToyOptions:
        """Options of a toy."""

        rate: float = option(0.5, key="toy_rate", help="toy: the rate.")
        steps: int = dataclasses.field(default=3, metadata={"help": "toy: the steps."})

    rate, steps = option_specs(ToyOptions)
    assert (rate.key, rate.flag, rate.kind, rate.help) == ("toy_rate", "--toy-rate", "float",
                                                            "toy: the rate.")  # fmt: skip
    assert (steps.key, steps.flag, steps.kind, steps.help) == ("steps", "--steps", "int",
                                                                "toy: the steps.")  # fmt: skip


def _rendered_modules() -> set[str]:
    """The ``baselines`` modules the API reference renders (``::: module`` lines)."""
    pages = (ROOT / "docs" / "reference").glob("*.md")
    lines = (line.strip() for page in pages for line in page.read_text().splitlines())
    return {line.removeprefix(":::").strip() for line in lines if line.startswith("::: baselines.")}


def _documented_attributes(cls: type) -> dict[str, str]:
    """The ``Attributes:`` of a class's docstring as mkdocstrings reads them (griffe)."""
    griffe = pytest.importorskip("griffe")
    module = griffe.load(cls.__module__, search_paths=[str(ROOT)], allow_inspection=False)
    sections = module[cls.__name__].docstring.parse("google")
    return {
        attribute.name: " ".join(attribute.description.split())
        for section in sections
        if section.kind.value == "attributes"
        for attribute in section.value
    }


def test_the_reference_documents_an_option_as_the_command_line_does() -> None:
    rendered = [cls for cls in _option_classes() if cls.__module__ in _rendered_modules()]
    assert rendered, "the reference renders baselines.strategies.base (StrategyOptions)"
    for cls in rendered:
        own = {f.name: f.metadata["help"] for f in dataclasses.fields(cls)}
        assert _documented_attributes(cls) == own, cls.__name__
