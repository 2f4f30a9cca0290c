"""Packages whose public names are imported from their modules on first use (PEP 562).

``pflkit --help`` and the scoring service's upload route import ``benchmark.evaluation`` and
``benchmark.model`` for light things (a command's options, the safetensors checks); the names
that need torch and transformers load them only when asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, homes: Mapping[str, tuple[str, ...]]
) -> tuple[list[str], Callable[[str], Any]]:
    """``__all__`` and ``__getattr__`` of a package that imports its names on first use.

    Args:
        package: the package's ``__name__``.
        homes: module (relative to the package) -> the public names it defines.

    Returns:
        ``(__all__, __getattr__)``.
    """
    module_of = {name: module for module, names in homes.items() for name in names}

    def __getattr__(name: str) -> Any:
        if name not in module_of:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module_of[name]}"), name)

    return sorted(module_of), __getattr__
