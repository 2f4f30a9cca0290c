"""Where a federated run trains: ``TrainConfig.device`` and its memory options, on a model.

The in-process engine and each Flower node call :func:`place_model` on the model they prepare
(each node resolves ``auto`` on its own machine). The local trainer then runs on the device the
parameters are on (:mod:`baselines.engine.local_training`). What crosses the wire never changes with
the device: :func:`baselines.core.parameters.get_values` copies the communicated values to the CPU in
fp32, a method's per-client state is kept on the CPU, and the checkpoint is exported from a CPU
copy. A CPU run is the same computation as before devices existed (``tests/baselines/
test_cpu_pins.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torch import nn

from benchmark.model.device import resolve_device

if TYPE_CHECKING:
    from baselines.config import TrainConfig


def place_model(model: nn.Module, config: TrainConfig) -> nn.Module:
    """Move a prepared model to the run's device and apply its memory options.

    Args:
        model: the model as the method prepared it (peft-wrapped or not).
        config: the run's configuration (``device``, ``gradient_checkpointing``).

    Returns:
        The same model, on the device.

    Raises:
        ValueError: for a device this machine does not have.
    """
    if config.gradient_checkpointing:
        enable_gradient_checkpointing(model)
    return model.to(resolve_device(config.device))


def enable_gradient_checkpointing(model: nn.Module) -> None:
    """Recompute the activations of every family model inside ``model`` in the backward pass.

    Raises:
        ValueError: when ``model`` holds no model of a family the kit knows.
    """
    from transformers import PreTrainedModel

    from benchmark.model.families import FAMILIES

    found = [m for m in model.modules()
             if isinstance(m, PreTrainedModel) and m.config.model_type in FAMILIES]  # fmt: skip
    if not found:
        raise ValueError(
            "--gradient-checkpointing applies to the kit's model families "
            f"({', '.join(FAMILIES)}); this model has none"
        )
    for family_model in found:
        FAMILIES[family_model.config.model_type].enable_gradient_checkpointing(family_model)
