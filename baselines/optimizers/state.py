"""A ``torch.optim`` optimiser's state as flat named tensors, and back.

A client whose optimiser state persists across rounds keeps it in its per-client state
(``ClientJob.state``), which the run saves as safetensors: names to tensors, nothing else. This
module turns ``optimizer.state`` into ``{prefix}{position}/{key}`` tensors (``position``: the
parameter's index in the optimiser's parameter list, the same every round because the trainable
parameters are listed in model order) and loads such tensors into a fresh optimiser. Python
numbers in the state (a step count) are saved as 0-d float64 tensors and read back as numbers of
their type; any other kind of value is refused rather than silently dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping

import torch

#: prefix of the optimiser's entries in a client's state.
PREFIX = "optimizer/"
_INT = "__int__/"
_FLOAT = "__float__/"


def export_state(optimizer: torch.optim.Optimizer, prefix: str = PREFIX) -> dict[str, torch.Tensor]:
    """The optimiser's per-parameter state as named tensors (copies).

    Args:
        optimizer: the optimiser.
        prefix: prefix of every name.

    Returns:
        ``{prefix}{position}/{key}`` -> tensor.

    Raises:
        TypeError: for a state value that is neither a tensor nor a number.
    """
    tensors: dict[str, torch.Tensor] = {}
    for position, parameter in enumerate(_parameters(optimizer)):
        for key, value in optimizer.state.get(parameter, {}).items():
            name = f"{prefix}{position}/"
            if isinstance(value, torch.Tensor):
                tensors[name + key] = value.detach().clone()
            elif isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"optimizer state {key!r} is a {type(value).__name__}; only "
                                "tensors and numbers can be saved with the client's state")
            else:
                tag = _INT if isinstance(value, int) else _FLOAT
                tensors[name + tag + key] = torch.tensor(value, dtype=torch.float64)
    return tensors


def import_state(optimizer: torch.optim.Optimizer, tensors: Mapping[str, torch.Tensor],
                 prefix: str = PREFIX) -> None:
    """Load named tensors written by :func:`export_state` into a fresh optimiser.

    Args:
        optimizer: the optimiser (built over the same parameters, in the same order).
        tensors: names -> tensors (names without ``prefix`` are ignored).
        prefix: the prefix the names were written with.

    Raises:
        ValueError: when a name points at a parameter the optimiser does not have.
    """
    parameters = _parameters(optimizer)
    for name, value in tensors.items():
        if not name.startswith(prefix):
            continue
        position, key = name[len(prefix):].split("/", 1)
        if not 0 <= int(position) < len(parameters):
            raise ValueError(f"saved optimiser state {name!r} names parameter {position}, but the "
                             f"optimiser has {len(parameters)}; was the method changed?")
        slot = optimizer.state[parameters[int(position)]]
        if key.startswith(_INT):
            slot[key[len(_INT):]] = int(value.item())
        elif key.startswith(_FLOAT):
            slot[key[len(_FLOAT):]] = float(value.item())
        else:
            slot[key] = value.clone()


def save_into(state: MutableMapping[str, torch.Tensor], optimizer: torch.optim.Optimizer,
              prefix: str = PREFIX) -> None:
    """Replace the optimiser entries of a client's state with the optimiser's current state.

    Args:
        state: the client's state (changed in place).
        optimizer: the optimiser after local training.
        prefix: the prefix of the optimiser's entries.
    """
    for name in [name for name in state if name.startswith(prefix)]:
        del state[name]
    state.update(export_state(optimizer, prefix))


def _parameters(optimizer: torch.optim.Optimizer) -> list[torch.nn.Parameter]:
    """The optimiser's parameters in order."""
    return [p for group in optimizer.param_groups for p in group["params"]]
