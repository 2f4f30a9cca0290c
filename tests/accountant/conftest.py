"""Shared declarations for the accountant tests."""

from __future__ import annotations

import pytest

COMPETITION = {
    "epsilon": 1,
    "delta": 1e-5,
    "noise_multiplier": 1.145,
    "clipping_norm": 0.5,
    "rounds": 5,
    "clients": 10,
    "clients_per_round": 2,
    "providers_per_round": 50,
    "min_providers": 400,
    "sampling": "poisson",
    "analysis": "competition",
    "unit": "provider",
}


@pytest.fixture
def competition() -> dict:
    """The PFL-DocVQA 2023 track-2 configuration at epsilon 1 (Poisson sampling declared)."""
    return dict(COMPETITION)
