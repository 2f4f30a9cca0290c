"""Server strategies against hand computations (Reddi et al. 2021, Algorithm 2; Hsu et al. 2019)."""

from __future__ import annotations

import math

import pytest
import torch

from baselines.core.client_update import ClientUpdate
from baselines.strategies import (
    STRATEGIES,
    FedAdam,
    FedAvg,
    FedAvgM,
    FedAvgMOptions,
    FedOptOptions,
    FedYogi,
    StrategyOptions,
    get_strategy,
)


def _update(value: float, n: int) -> ClientUpdate:
    return ClientUpdate({"w": torch.tensor([value]), "b": torch.tensor([[-value, 2 * value]])}, n)


WEIGHTS = {"w": torch.tensor([10.0]), "b": torch.tensor([[1.0, 1.0]])}


def test_fedavg_weights_updates_by_examples() -> None:
    strategy = FedAvg(StrategyOptions(clients_per_round=2))
    new = strategy.aggregate_fit(1, WEIGHTS, [_update(1.0, 1), _update(2.0, 3)])
    # (1 * 1 + 3 * 2) / 4 = 1.75
    assert new["w"].item() == pytest.approx(11.75)
    assert new["b"].reshape(-1).tolist() == pytest.approx([1 - 1.75, 1 + 3.5])


def test_fedavg_unweighted_and_server_learning_rate() -> None:
    strategy = FedAvg(StrategyOptions(weighted=False, server_lr=0.5))
    new = strategy.aggregate_fit(1, WEIGHTS, [_update(1.0, 1), _update(2.0, 3)])
    assert new["w"].item() == pytest.approx(10 + 0.5 * 1.5)


def test_fedavgm_accumulates_server_momentum() -> None:
    strategy = FedAvgM(FedAvgMOptions(server_momentum=0.9))
    first = strategy.aggregate_fit(1, WEIGHTS, [_update(1.0, 1), _update(2.0, 3)])
    assert first["w"].item() == pytest.approx(11.75)  # v_1 = 1.75
    second = strategy.aggregate_fit(2, first, [_update(1.0, 5)])
    # v_2 = 0.9 * 1.75 + 1 = 2.575
    assert second["w"].item() == pytest.approx(11.75 + 2.575)


def _adaptive_by_hand(deltas: list[float], *, yogi: bool, eta=0.01, b1=0.9, b2=0.99, tau=1e-3):
    """Reddi et al. 2021, Algorithm 2, written out on scalars."""
    x, m, v = 10.0, 0.0, tau**2
    for delta in deltas:
        m = b1 * m + (1 - b1) * delta
        if yogi:
            v = v - (1 - b2) * delta**2 * math.copysign(1.0, v - delta**2)
        else:
            v = b2 * v + (1 - b2) * delta**2
        x = x + eta * m / (math.sqrt(v) + tau)
    return x


@pytest.mark.parametrize(("cls", "yogi"), [(FedAdam, False), (FedYogi, True)])
def test_adaptive_strategies_match_algorithm_2(cls, yogi: bool) -> None:
    strategy = cls(FedOptOptions(beta1=0.9, beta2=0.99, tau=1e-3))
    assert strategy.server_lr == 0.01
    weights = {"w": torch.tensor([10.0])}
    deltas = [2.0, 0.1, -0.5]
    for round_, delta in enumerate(deltas, start=1):
        weights = strategy.aggregate_fit(
            round_, weights, [ClientUpdate({"w": torch.tensor([delta])}, 4)]
        )
    assert weights["w"].item() == pytest.approx(_adaptive_by_hand(deltas, yogi=yogi), rel=1e-6)


def test_fedadam_and_fedyogi_differ_in_the_second_moment() -> None:
    assert _adaptive_by_hand([2.0, 0.1], yogi=False) != pytest.approx(
        _adaptive_by_hand([2.0, 0.1], yogi=True), rel=1e-9
    )


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_state_dict_round_trip_continues_identically(name: str) -> None:
    config: dict[str, float] = {}
    original = get_strategy(name, config)
    weights = {"w": torch.tensor([1.0, -2.0])}
    weights = original.aggregate_fit(1, weights, [ClientUpdate({"w": torch.tensor([0.3, 0.1])}, 2)])
    restored = get_strategy(name, config)
    restored.load_state_dict(original.state_dict())
    step = [ClientUpdate({"w": torch.tensor([-0.2, 0.4])}, 2)]
    expected = original.aggregate_fit(2, weights, step)
    assert torch.equal(expected["w"], restored.aggregate_fit(2, weights, step)["w"])
    assert not torch.equal(expected["w"], weights["w"])


def test_client_sampling_is_seeded_and_without_replacement() -> None:
    strategy = FedAvg(StrategyOptions(clients_per_round=3))
    picks = [strategy.configure_fit(r, 10, seed=7) for r in range(1, 21)]
    assert picks == [strategy.configure_fit(r, 10, seed=7) for r in range(1, 21)]
    assert all(len(set(p)) == 3 and all(0 <= c < 10 for c in p) for p in picks)
    assert len({tuple(p) for p in picks}) > 1
    assert picks != [strategy.configure_fit(r, 10, seed=8) for r in range(1, 21)]


def test_more_clients_per_round_than_clients_is_refused() -> None:
    with pytest.raises(ValueError, match="at most 10"):
        FedAvg(StrategyOptions(clients_per_round=11)).configure_fit(1, 10, seed=0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"clients_per_round": 0}, "clients per round"),
        ({"server_lr": 0.0}, "server learning rate"),
        ({"beta2": 1.0}, "beta2"),
        ({"tau": 0.0}, "tau"),
    ],
)
def test_bad_strategy_options_are_refused(kwargs, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FedOptOptions(**kwargs)


def test_unknown_strategy_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown strategy 'fedprox'"):
        get_strategy("fedprox", {})
