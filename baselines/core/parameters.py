"""Which tensors a federation communicates, declared once and deduplicated by storage.

A model's ``state_dict`` can list the same tensor under several names (T5's ``shared``,
``encoder.embed_tokens`` and ``decoder.embed_tokens`` and, with tied embeddings, ``lm_head``).
The competition's public logger counted every alias, inflating the bytes it reported. Here the
communicated set is the set of *trainable* parameters grouped by the memory they occupy: every
group is sent once under its canonical (first) name, and the aliases are recorded next to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch
from torch import nn


@dataclass(frozen=True)
class CommunicatedParameters:
    """The tensors that travel between server and clients.

    Attributes:
        names: canonical names, in the model's parameter order (the order of every message).
        shapes: shape of each canonical tensor.
        aliases: canonical name -> the other names that share its storage (empty tuple if none).
        prefix: a prefix stripped from the model's own names (e.g. peft's ``base_model.model.``).
    """

    names: tuple[str, ...]
    shapes: Mapping[str, tuple[int, ...]]
    aliases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    prefix: str = ""

    @property
    def numel(self) -> int:
        """Number of scalar values in one full-precision message."""
        total = 0
        for name in self.names:
            count = 1
            for size in self.shapes[name]:
                count *= size
            total += count
        return total

    def __len__(self) -> int:
        return len(self.names)


def _storage_key(tensor: torch.Tensor) -> tuple[int, int, tuple[int, ...], tuple[int, ...]]:
    """Identity of the memory a tensor views: storage pointer, offset, shape and stride."""
    return (
        tensor.untyped_storage().data_ptr(),
        tensor.storage_offset(),
        tuple(tensor.shape),
        tuple(tensor.stride()),
    )


def _strip(name: str, prefix: str) -> str:
    return name[len(prefix) :] if prefix and name.startswith(prefix) else name


def select_communicated(model: nn.Module, *, prefix: str = "") -> CommunicatedParameters:
    """Declare the communicated set of a model: its trainable tensors, each storage once.

    Args:
        model: the model as clients train it; a parameter is communicated iff it requires grad.
        prefix: a prefix to strip from parameter names (wrappers such as peft add one).

    Returns:
        The communicated parameters with their aliases.

    Raises:
        ValueError: if the model has no trainable parameter, or a storage is shared between a
            trainable and a frozen name.
    """
    groups: dict[tuple, list[tuple[str, torch.Tensor]]] = {}
    for name, tensor in model.named_parameters(remove_duplicate=False):
        groups.setdefault(_storage_key(tensor), []).append((name, tensor))
    for name, tensor in model.named_buffers(remove_duplicate=False):
        key = _storage_key(tensor)
        if key in groups:
            groups[key].append((name, tensor))
    names: list[str] = []
    shapes: dict[str, tuple[int, ...]] = {}
    aliases: dict[str, tuple[str, ...]] = {}
    for members in groups.values():
        flags = {bool(getattr(tensor, "requires_grad", False)) for _, tensor in members}
        if len(flags) > 1:
            raise ValueError(
                f"tensors {[n for n, _ in members]} share storage but are not all trainable; "
                "freeze or train tied tensors together"
            )
        if not flags.pop():
            continue
        canonical = _strip(members[0][0], prefix)
        names.append(canonical)
        shapes[canonical] = tuple(members[0][1].shape)
        aliases[canonical] = tuple(_strip(n, prefix) for n, _ in members[1:])
    if not names:
        raise ValueError("the model has no trainable parameter: nothing would be communicated")
    return CommunicatedParameters(tuple(names), shapes, aliases, prefix)


def parameter_map(model: nn.Module, spec: CommunicatedParameters) -> dict[str, torch.Tensor]:
    """The model's live communicated tensors (gradients flow through them) by canonical name.

    Args:
        model: the model.
        spec: the communicated set.

    Returns:
        Canonical name -> the model's parameter.

    Raises:
        KeyError: when the model lacks a communicated name.
    """
    found = {
        _strip(name, spec.prefix): tensor
        for name, tensor in model.named_parameters(remove_duplicate=False)
    }
    missing = [name for name in spec.names if name not in found]
    if missing:
        raise KeyError(f"the model has no parameter named {missing[:3]}")
    return {name: found[name] for name in spec.names}


def get_values(model: nn.Module, spec: CommunicatedParameters) -> dict[str, torch.Tensor]:
    """Copy the current values of the communicated tensors out of a model (fp32, detached, on
    the CPU whatever device the model trains on: what the wire and the logs carry).

    Args:
        model: the model to read.
        spec: the communicated set.

    Returns:
        Canonical name -> a float32 CPU copy of the tensor.
    """
    return {
        name: tensor.detach().to(device="cpu", dtype=torch.float32, copy=True)
        for name, tensor in parameter_map(model, spec).items()
    }


def set_values(
    model: nn.Module, spec: CommunicatedParameters, values: Mapping[str, torch.Tensor]
) -> None:
    """Write communicated tensors into a model in place (aliases follow through their storage).

    Args:
        model: the model to update.
        spec: the communicated set.
        values: canonical name -> new value; every communicated name must be present.

    Raises:
        KeyError: if a communicated name is missing from ``values``.
        ValueError: if a value has the wrong shape.
    """
    targets = parameter_map(model, spec)
    with torch.no_grad():
        for name, target in targets.items():
            if name not in values:
                raise KeyError(f"no value received for communicated parameter {name!r}")
            value = values[name]
            if tuple(value.shape) != tuple(target.shape):
                raise ValueError(
                    f"{name}: received shape {tuple(value.shape)}, expected {tuple(target.shape)}"
                )
            target.copy_(value.to(target.dtype))
