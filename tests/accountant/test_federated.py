"""Provider-level sampling rate under the competition and strict analyses."""

from __future__ import annotations

import pytest

from accountant.federated import federated_sample_rate

COMPETITION = {
    "clients_per_round": 2,
    "clients": 10,
    "providers_per_round": 50,
    "min_providers": 400,
}


def test_competition_rate_is_the_product():
    assert federated_sample_rate(**COMPETITION) == 0.025
    assert federated_sample_rate(**COMPETITION, analysis="competition") == 2 * 50 / (10 * 400)


def test_strict_rate_ignores_client_sampling():
    assert federated_sample_rate(**COMPETITION, analysis="strict") == 0.125


def test_rate_is_rounded_once():
    # 0.2 * 0.125 in floats would be computed from two rounded factors; the fraction is exact.
    assert (
        federated_sample_rate(
            clients_per_round=1, clients=3, providers_per_round=1, min_providers=7
        )
        == 1 / 21
    )


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"clients_per_round": 11}, "clients_per_round"),
        ({"clients_per_round": 0}, "clients_per_round"),
        ({"clients": 0}, "clients"),
        ({"providers_per_round": 401}, "providers_per_round"),
        ({"min_providers": 2.5}, "min_providers"),
        ({"analysis": "lenient"}, "analysis"),
    ],
)
def test_bad_federated_arguments(change, field):
    arguments = {**COMPETITION, **change}
    with pytest.raises(ValueError, match=field):
        federated_sample_rate(**arguments)
