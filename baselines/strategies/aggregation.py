"""The arithmetic of server-side aggregation, as free functions on name -> tensor dictionaries.

Notation of Reddi et al. 2021, "Adaptive Federated Optimization", ICLR
(https://arxiv.org/abs/2003.00295), Algorithm 2: ``Delta_t`` is the average of the clients'
updates, ``m_t`` and ``v_t`` the server optimiser's first and second moments, ``eta`` the server
learning rate and ``tau`` the adaptivity (numerical floor) of the adaptive methods.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

Tensors = Mapping[str, torch.Tensor]


def weighted_average(updates: Sequence[Tensors], weights: Sequence[float]) -> dict[str, torch.Tensor]:
    """``sum_i w_i u_i / sum_i w_i`` for every tensor name (McMahan et al. 2017, FedAvg).

    Args:
        updates: one dictionary per client, all with the same names.
        weights: one non-negative weight per client, not all zero.

    Returns:
        The weighted average per name.

    Raises:
        ValueError: on empty input, mismatched lengths or a zero total weight.
    """
    if not updates or len(updates) != len(weights):
        raise ValueError("need one weight per update and at least one update")
    total = float(sum(weights))
    if total <= 0:
        raise ValueError("the aggregation weights sum to zero")
    names = list(updates[0])
    average: dict[str, torch.Tensor] = {}
    for name in names:
        acc = torch.zeros_like(updates[0][name], dtype=torch.float64)
        for update, weight in zip(updates, weights, strict=True):
            acc += update[name].to(torch.float64) * (float(weight) / total)
        average[name] = acc.to(torch.float32)
    return average


def apply_update(weights: Tensors, step: Tensors, scale: float = 1.0) -> dict[str, torch.Tensor]:
    """``x_{t+1} = x_t + scale * step`` per name."""
    return {name: weights[name] + scale * step[name] for name in weights}


def momentum_velocity(velocity: Tensors | None, delta: Tensors, momentum: float) -> dict[str, torch.Tensor]:
    """FedAvgM server momentum, ``v_t = beta v_{t-1} + Delta_t`` (Hsu et al. 2019,
    https://arxiv.org/abs/1909.06335); ``v_{-1} = 0``."""
    if velocity is None:
        return {name: value.clone() for name, value in delta.items()}
    return {name: momentum * velocity[name] + delta[name] for name in delta}


def first_moment(m: Tensors | None, delta: Tensors, beta1: float) -> dict[str, torch.Tensor]:
    """``m_t = beta1 m_{t-1} + (1 - beta1) Delta_t`` with ``m_{-1} = 0`` (Reddi et al., Alg. 2)."""
    if m is None:
        return {name: (1 - beta1) * value for name, value in delta.items()}
    return {name: beta1 * m[name] + (1 - beta1) * delta[name] for name in delta}


def adam_second_moment(v: Tensors, delta: Tensors, beta2: float) -> dict[str, torch.Tensor]:
    """FedAdam: ``v_t = beta2 v_{t-1} + (1 - beta2) Delta_t^2`` (Reddi et al., Alg. 2)."""
    return {name: beta2 * v[name] + (1 - beta2) * delta[name].square() for name in delta}


def yogi_second_moment(v: Tensors, delta: Tensors, beta2: float) -> dict[str, torch.Tensor]:
    """FedYogi: ``v_t = v_{t-1} - (1 - beta2) Delta_t^2 sign(v_{t-1} - Delta_t^2)``
    (Reddi et al., Alg. 2; Zaheer et al. 2018)."""
    out = {}
    for name in delta:
        square = delta[name].square()
        out[name] = v[name] - (1 - beta2) * square * torch.sign(v[name] - square)
    return out


def adaptive_step(m: Tensors, v: Tensors, tau: float) -> dict[str, torch.Tensor]:
    """The adaptive direction ``m_t / (sqrt(v_t) + tau)`` (Reddi et al., Alg. 2)."""
    return {name: m[name] / (v[name].sqrt() + tau) for name in m}
