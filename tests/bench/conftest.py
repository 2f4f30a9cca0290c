"""Fixtures of the benches' tests: the results tables' hook and the committed data files."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: the committed results tables' data files
DATA = ROOT / "docs" / "results" / "data"


@pytest.fixture(scope="session")
def hook() -> ModuleType:
    """``docs/hooks/results_tables.py``, loaded from its file as MkDocs loads it."""
    spec = importlib.util.spec_from_file_location("results_tables", ROOT / "docs/hooks/results_tables.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def committed() -> Callable[[str], dict[str, Any]]:
    """The committed data file ``docs/results/data/NAME.json``, read."""

    def read(name: str) -> dict[str, Any]:
        return json.loads((DATA / name).read_text(encoding="utf-8"))

    return read


@pytest.fixture()
def written(hook: ModuleType) -> Callable[[Path], dict[str, Any]]:
    """A data file a bench wrote, read and checked by the hook (every cell in its column's
    format)."""

    def read(path: Path) -> dict[str, Any]:
        data = hook.load(path)
        hook.render(data, path.name)
        return data

    return read
