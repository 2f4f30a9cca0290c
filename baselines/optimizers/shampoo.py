"""Shampoo, the local optimiser of FedShampoo (the PFL-DocVQA track-1 runner-up).

Gupta, Koren and Singer 2018, "Shampoo: Preconditioned Stochastic Tensor Optimization", ICML
(https://arxiv.org/abs/1802.09568), Algorithm 1, for every weight matrix ``W`` (m x n) with
stochastic gradient ``G``::

    L <- L + G G^T,   R <- R + G^T G,   W <- W - lr * L^(-1/4) G R^(-1/4)

with ``L = R = eps I`` at the start. Choices (each a place where papers and libraries differ):

- **Layer-wise, block-diagonal.** One ``L`` and one ``R`` per weight matrix; a matrix with a side
  longer than ``block_size`` is cut into blocks of at most ``block_size`` x ``block_size``, each
  preconditioned on its own (the block-diagonal approximation of Anil et al. 2020, "Scalable
  Second Order Optimization for Deep Learning", https://arxiv.org/abs/2002.09018, section 3),
  so memory is at most ``2 * block_size^2`` values per block. Tensors of more than two
  dimensions are read as ``(shape[0], rest)`` matrices.
- **Vectors** (biases, layer norms) get the diagonal preconditioner ``(eps + sum g^2)^(-1/2)``
  (AdaGrad), as Anil et al. precondition rank-1 tensors; the full ``n x n`` order-1 Shampoo
  would cost ``n^2`` for no gain on a norm's scale.
- **Inverse roots** by a symmetric eigendecomposition in float64 (``torch.linalg.eigh``,
  eigenvalues floored at ``eps``), recomputed every ``update_every`` steps (Gupta et al.'s
  practice of stale roots); the statistics grow every step. Deterministic on the CPU.
- **Momentum** (heavy ball on the preconditioned direction) and **decoupled weight decay** are
  off by default, as in Algorithm 1.

Why not a library: ``pytorch-optimizer`` 3.x's ``Shampoo`` applies ``L^(-1/2) G R^(-1/2)``
(exponent ``-1/order``, not Algorithm 1's ``-1/(2 order)``), has no block partitioning (a
32128-row output layer would need a 32128^2 preconditioner) and writes its momentum into
``p.grad``; its ``ScalableShampoo`` partitions blocks but keeps its state in Python objects
(``PreConditioner``, grafting) that a client's state cannot save as safetensors, and adds
grafting, delayed start and EMA statistics that are not the runner-up's Algorithm 1.
``heavyball`` is compile-first (``torch.compile``), which on this 2-core CPU machine costs
minutes of compilation per shape. Here every piece of state is a tensor in ``optimizer.state``,
so a client's preconditioners persist across rounds with ``--persist-optimizer-state`` and
``--resume`` restores them bit for bit (:mod:`baselines.optimizers.state`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch

from baselines.optimizers.base import LocalOptimizerOptions, Optimizer
from baselines.options import option


@dataclass(frozen=True)
class ShampooOptions:
    """Options of the local Shampoo.

    Raises:
        ValueError: naming the invalid option.
    """

    lr: float = option(1e-3, help="local learning rate.")
    momentum: float = option(
        0.0, help="heavy-ball momentum on the preconditioned direction (0: none)."
    )
    weight_decay: float = option(0.0, help="local decoupled weight decay.")
    eps: float = option(
        1e-6,
        key="shampoo_eps",
        help="shampoo: the preconditioners' starting value eps * I (and the floor of their "
        "eigenvalues).",
    )
    block_size: int = option(
        256,
        key="shampoo_block_size",
        help="shampoo: the longest side of a preconditioned block; larger matrices are cut "
        "into blocks (block-diagonal approximation).",
    )
    update_every: int = option(
        1,
        key="shampoo_update_every",
        help="shampoo: recompute the inverse 4th roots every N steps.",
    )

    def __post_init__(self) -> None:
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if not 0 <= self.momentum < 1:
            raise ValueError(f"--momentum must be in [0, 1), got {self.momentum}")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay}")
        if not self.eps > 0:
            raise ValueError(f"--shampoo-eps must be > 0, got {self.eps}")
        if self.block_size < 1 or self.update_every < 1:
            raise ValueError("--shampoo-block-size and --shampoo-update-every must be >= 1, got "
                             f"{self.block_size} and {self.update_every}")


def inverse_root(matrix: torch.Tensor, root: int, eps: float) -> torch.Tensor:
    """``matrix^(-1/root)`` of a symmetric positive semi-definite matrix.

    Args:
        matrix: the symmetric matrix.
        root: the root (4 for Shampoo's matrices).
        eps: floor of the eigenvalues.

    Returns:
        The inverse root, in the matrix's dtype.
    """
    values, vectors = torch.linalg.eigh(matrix.double())
    scaled = vectors * values.clamp_min(eps).pow(-1.0 / root)
    return (scaled @ vectors.T).to(matrix.dtype)


def _blocks(length: int, size: int) -> list[int]:
    """Sizes of the blocks that cut ``length`` into parts of at most ``size``."""
    count = math.ceil(length / size)
    return [min(size, length - i * size) for i in range(count)]


class ShampooOptimizer(torch.optim.Optimizer):
    """Shampoo with block-diagonal layer-wise preconditioners (see the module docstring).

    Args:
        params: the parameters.
        lr: learning rate.
        momentum: heavy-ball momentum on the preconditioned direction.
        weight_decay: decoupled weight decay.
        eps: starting value of the preconditioners (eps * I) and floor of their eigenvalues.
        block_size: longest side of a preconditioned block.
        update_every: recompute the inverse roots every N steps.
    """

    def __init__(self, params: Iterable[torch.nn.Parameter], *, lr: float = 1e-3,
                 momentum: float = 0.0, weight_decay: float = 0.0, eps: float = 1e-6,
                 block_size: int = 256, update_every: int = 1) -> None:
        ShampooOptions(lr=lr, momentum=momentum, weight_decay=weight_decay, eps=eps,
                       block_size=block_size, update_every=update_every)
        super().__init__(params, {"lr": lr, "momentum": momentum, "weight_decay": weight_decay,
                                  "eps": eps, "block_size": block_size,
                                  "update_every": update_every})

    @torch.no_grad()
    def step(self, closure=None):  # noqa: ANN001, ANN201 (torch.optim's signature)
        """One Shampoo step for every parameter with a gradient."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for parameter in group["params"]:
                if parameter.grad is None:
                    continue
                direction = self._direction(parameter, group)
                state = self.state[parameter]
                if group["momentum"] > 0:
                    buffer = state.setdefault("momentum_buffer", torch.zeros_like(direction))
                    buffer.mul_(group["momentum"]).add_(direction)
                    direction = buffer
                if group["weight_decay"] > 0:
                    parameter.mul_(1 - group["lr"] * group["weight_decay"])
                parameter.add_(direction, alpha=-group["lr"])
        return loss

    def _direction(self, parameter: torch.nn.Parameter, group: dict) -> torch.Tensor:
        """The preconditioned gradient (statistics updated, roots recomputed when due)."""
        state = self.state[parameter]
        grad = parameter.grad.detach()
        step = state.setdefault("step", torch.zeros((), dtype=torch.float64))
        step += 1
        eps = group["eps"]
        if grad.dim() < 2:
            total = state.setdefault("sum_squares", torch.full_like(grad, eps))
            total.add_(grad * grad)
            return grad / total.sqrt()
        matrix = grad.reshape(grad.shape[0], -1)
        refresh = (int(step) - 1) % group["update_every"] == 0
        rows = matrix.split(_blocks(matrix.shape[0], group["block_size"]), dim=0)
        out_rows = []
        for i, row in enumerate(rows):
            out_blocks = []
            for j, block in enumerate(row.split(_blocks(matrix.shape[1], group["block_size"]),
                                                dim=1)):
                out_blocks.append(self._precondition(state, f"{i}_{j}", block, eps, refresh))
            out_rows.append(torch.cat(out_blocks, dim=1))
        return torch.cat(out_rows, dim=0).reshape(grad.shape)

    @staticmethod
    def _precondition(state: dict, key: str, block: torch.Tensor, eps: float,
                      refresh: bool) -> torch.Tensor:
        """``L^(-1/4) G R^(-1/4)`` of one block, its statistics grown by ``G``."""
        left = state.setdefault(f"L{key}", eps * torch.eye(block.shape[0], dtype=block.dtype,
                                                            device=block.device))
        right = state.setdefault(f"R{key}", eps * torch.eye(block.shape[1], dtype=block.dtype,
                                                              device=block.device))
        left.add_(block @ block.T)
        right.add_(block.T @ block)
        if refresh or f"Linv{key}" not in state:
            state[f"Linv{key}"] = inverse_root(left, 4, eps)
            state[f"Rinv{key}"] = inverse_root(right, 4, eps)
        return state[f"Linv{key}"] @ block @ state[f"Rinv{key}"]


class Shampoo(Optimizer):
    """Shampoo (Gupta et al. 2018) as a local optimiser; see the module docstring."""

    name = "shampoo"
    option_classes = (ShampooOptions, LocalOptimizerOptions)

    def __call__(self, parameters: Iterable[torch.nn.Parameter]) -> torch.optim.Optimizer:
        """A fresh Shampoo over ``parameters``."""
        o = self.options
        return ShampooOptimizer(list(parameters), lr=o.lr, momentum=o.momentum,
                                weight_decay=o.weight_decay, eps=o.eps,
                                block_size=o.block_size, update_every=o.update_every)
