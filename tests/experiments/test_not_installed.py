"""The research scripts run from a checkout and are never installed with the product."""

from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import find_packages

ROOT = Path(__file__).resolve().parents[2]


def test_the_package_discovery_leaves_the_experiments_out() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    rules = setuptools["packages"]["find"]
    packages = find_packages(ROOT, include=rules["include"], exclude=rules.get("exclude", ()))
    assert not [name for name in packages if name.split(".")[0] == "experiments"]
    assert {"baselines", "baselines.engine", "baselines.strategies"} <= set(packages)
