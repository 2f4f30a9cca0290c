"""The communicated set: trainable tensors, aliases found by storage and sent once."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from baselines.core.parameters import get_values, select_communicated, set_values


class Tied(nn.Module):
    """Two differently named Parameters over one storage, plus a frozen part."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(7, 3)
        self.head = nn.Linear(3, 7, bias=False)
        self.head.weight = nn.Parameter(self.embed.weight.data)  # new Parameter, same storage
        self.body = nn.Linear(3, 3)
        self.frozen = nn.Linear(3, 2)
        self.frozen.requires_grad_(False)


def test_aliases_are_found_by_storage_not_by_name() -> None:
    model = Tied()
    assert model.head.weight is not model.embed.weight
    spec = select_communicated(model)
    assert spec.names == ("embed.weight", "body.weight", "body.bias")
    assert spec.aliases["embed.weight"] == ("head.weight",)
    assert spec.numel == 7 * 3 + 3 * 3 + 3


def test_set_values_writes_through_aliases_and_get_values_copies() -> None:
    model = Tied()
    spec = select_communicated(model)
    values = get_values(model, spec)
    values["embed.weight"] = torch.arange(21.0).reshape(7, 3)
    set_values(model, spec, values)
    assert torch.equal(model.head.weight, values["embed.weight"])
    values["embed.weight"].add_(1)
    assert not torch.equal(model.embed.weight, values["embed.weight"])
    with pytest.raises(ValueError, match="expected"):
        set_values(model, spec, {**values, "body.bias": torch.zeros(4)})
    with pytest.raises(KeyError, match="body.bias"):
        set_values(model, spec, {k: v for k, v in values.items() if k != "body.bias"})


def test_a_storage_shared_by_a_trainable_and_a_frozen_name_is_refused() -> None:
    model = Tied()
    model.head.weight.requires_grad_(False)
    with pytest.raises(ValueError, match="share storage"):
        select_communicated(model)


def test_a_model_with_nothing_trainable_is_refused() -> None:
    model = nn.Linear(2, 2).requires_grad_(False)
    with pytest.raises(ValueError, match="nothing would be communicated"):
        select_communicated(model)
