"""Registries that find their entries by scanning a package: a new entry is one new file.

The kit's pluggable components (methods, strategies and optimisers in ``baselines``; wire formats
in :mod:`benchmark.wire_formats` and their codecs in ``baselines.wire``) are collected by
:func:`discover` from the modules of their package, never listed by hand.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from typing import TypeVar

T = TypeVar("T")


def discover(package: str, base: type[T]) -> dict[str, type[T]]:
    """The concrete subclasses of ``base`` defined in the modules of a package, by ``name``.

    Args:
        package: a package name (``baselines.methods``).
        base: the component base class (a class is listed when it sets a ``name`` of its own).

    Returns:
        Name -> class, sorted by name.

    Raises:
        ValueError: when two classes claim the same name.
    """
    root = importlib.import_module(package)
    found: dict[str, type[T]] = {}
    for module_info in pkgutil.iter_modules(root.__path__):
        module = importlib.import_module(f"{package}.{module_info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if (
                cls.__module__ == module.__name__
                and issubclass(cls, base)
                and cls.__dict__.get("name")
                and not inspect.isabstract(cls)
            ):
                if cls.name in found and found[cls.name] is not cls:
                    raise ValueError(
                        f"{cls.__module__}.{cls.__qualname__} and {found[cls.name].__qualname__} "
                        f"are both named {cls.name!r}; give one of them another name"
                    )
                found[cls.name] = cls
    return dict(sorted(found.items()))
