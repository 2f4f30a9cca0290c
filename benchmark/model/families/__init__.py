"""Document-model families, one a module (or package), found by scanning this package.

Every module here is scanned for :class:`~benchmark.model.families.base.ModelFamily` subclasses
(:func:`benchmark.discovery.discover`), so a new family is one new file: its name (the
``model_type`` of its checkpoints), how its checkpoints are built, read and fed, and the defaults
the methods need. The kit's families:

- ``vt5``: VT5 (T5 + DiT page features + OCR boxes), the 2023 competition's model
  (:mod:`benchmark.model.families.vt5`).
- ``pix2struct``: Pix2Struct, OCR-free, the question rendered as a header on the page
  (:mod:`benchmark.model.families.pix2struct`).

This package imports neither torch nor transformers: the evaluator's upload checks use it.
"""

from __future__ import annotations

from typing import Any

from benchmark.discovery import discover
from benchmark.model.families.base import DocumentProcessor, ModelFamily

#: The family of a checkpoint that names none (every run before families existed was VT5).
DEFAULT_FAMILY = "vt5"


class UnknownFamily(ValueError):
    """A ``model_type`` or ``--family`` that no family of this package declares."""


def discover_families(package: str = __name__) -> dict[str, type[ModelFamily]]:
    """The model families of a package's modules, by name.

    Args:
        package: the package to scan (this one).

    Returns:
        Name -> family class, sorted by name.
    """
    return discover(package, ModelFamily)


#: name -> family class (a new family is one new module of this package).
FAMILIES: dict[str, type[ModelFamily]] = discover_families()


def family_named(name: str) -> type[ModelFamily]:
    """The family of a name (``--family``, a config's ``model_type``).

    Raises:
        UnknownFamily: naming the families the kit knows.
    """
    found = FAMILIES.get(name)
    if found is None:
        raise UnknownFamily(
            f"unknown model family {str(name)[:40]!r}; the kit knows {', '.join(FAMILIES)}"
        )
    return found


def family_of(model: Any) -> type[ModelFamily]:
    """The family of a built model (its configuration's ``model_type``; VT5 when it has none).

    Raises:
        UnknownFamily: for a model of no family the kit knows.
    """
    return family_named(getattr(getattr(model, "config", None), "model_type", DEFAULT_FAMILY))


__all__ = ["DEFAULT_FAMILY", "FAMILIES", "DocumentProcessor", "ModelFamily", "UnknownFamily",
           "discover_families", "family_named", "family_of"]  # fmt: skip
