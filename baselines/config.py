"""One configuration of a federated run: its shape, its components by name, and their options.

The run's shape (rounds, clients per round, local epochs, batch size, seed, evaluation) is a field
each; the method, strategy and local optimiser are names of their registries
(:data:`~baselines.methods.METHODS`, :data:`~baselines.strategies.STRATEGIES`,
:data:`~baselines.optimizers.OPTIMIZERS`), the wire format a name of
:data:`~benchmark.wire_formats.WIRE_FORMATS`, and ``options`` holds the values of the options
those components and the federated pre-training phase (:mod:`baselines.fsp.options`) own
(:mod:`baselines.options`), so nothing here mirrors a component's fields: a new
method's options are configured without editing this module.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from baselines.fsp.options import PretrainingOptions, PretrainingPhase
from baselines.methods import METHODS, Method, RunShape
from baselines.optimizers import OPTIMIZERS, Optimizer
from baselines.options import OptionSpec, build_options, option_specs
from baselines.strategies import STRATEGIES, Strategy, parents_first
from baselines.wire import WireCodec, codec_class, get_codec
from benchmark.model.device import check_device_name, check_precision


@dataclass(frozen=True)
class TrainConfig:
    """Everything that decides what a federated run computes.

    Attributes:
        preset: the recipe name the run started from (``fedavg``, ``lora``, ...).
        method: what clients train and send (a name of ``METHODS``: ``full``, ``lora``, ...).
        strategy: how the server combines (a name of ``STRATEGIES``).
        optimizer: the local optimiser (a name of ``OPTIMIZERS``: ``adamw``, ``sgd``, ``shampoo``).
        wire: wire format of every message, a format of :mod:`benchmark.wire_formats`
            (``fp32``, ``nf4``, ``nf4-B``) with a codec (:func:`baselines.wire.codec_class`).
        rounds: federated rounds (0 only for a method that personalises every client
            afterwards: ``local-only``).
        clients_per_round: M, clients sampled per round.
        local_epochs: epochs over the client's data per round.
        batch_size: local batch size.
        max_grad_norm: clip each local gradient to this L2 norm (``None``: no clipping).
        seed: the run's seed (sampling, shuffling, adapters).
        val_limit: evaluate on the first N validation questions (``None``: all; 0: skip).
        eval_batch_size: batch size of validation.
        device: where clients train and the global model is evaluated: ``auto`` (CUDA when
            torch sees a GPU, else the CPU; each node of a deployed federation resolves it on
            its own machine), ``cpu``, ``cuda`` or ``cuda:N``. What crosses the wire, the logs
            and the checkpoint are the same on every device (fp32 on the CPU).
        precision: ``fp32``, or ``bf16``: ``torch.autocast`` around the local forward passes
            (weights, optimiser state and messages stay fp32).
        gradient_checkpointing: recompute the T5 blocks' activations in the backward pass
            instead of keeping them (less memory, about a third more compute).
        options: option key -> value for the method, strategy and optimiser (a key left out
            keeps the component's default; ``pflkit train --help`` lists every key as a flag).

    Raises:
        ValueError: naming the unknown component, the option that belongs to none of the run's
            components, or the invalid value.
    """

    preset: str = "custom"
    method: str = "full"
    strategy: str = "fedavg"
    optimizer: str = "adamw"
    wire: str = "fp32"
    rounds: int = 10
    clients_per_round: int = 2
    local_epochs: int = 1
    batch_size: int = 16
    max_grad_norm: float | None = None
    seed: int = 0
    val_limit: int | None = None
    eval_batch_size: int = 32
    device: str = "auto"
    precision: str = "fp32"
    gradient_checkpointing: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for kind, name, registry in (
            ("method", self.method, METHODS),
            ("strategy", self.strategy, STRATEGIES),
            ("optimizer", self.optimizer, OPTIMIZERS),
        ):
            if name not in registry:
                raise ValueError(f"unknown {kind} {name!r}; choose one of {sorted(registry)}")
        codec_class(self.wire)  # a format of benchmark/wire_formats/ with a codec
        for name in ("clients_per_round", "local_epochs", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.rounds < 0:
            raise ValueError(f"rounds must be >= 0, got {self.rounds}")
        if self.max_grad_norm is not None and not self.max_grad_norm > 0:
            raise ValueError(f"max_grad_norm must be > 0, got {self.max_grad_norm}")
        if self.val_limit is not None and self.val_limit < 0:
            raise ValueError(f"val_limit must be >= 0, got {self.val_limit}")
        check_device_name(self.device)
        check_precision(self.precision)
        specs = self.option_specs()
        foreign = sorted(set(self.options) - set(specs))
        if foreign:
            raise ValueError(
                f"option(s) {', '.join(foreign)} belong to neither method {self.method!r}, "
                f"strategy {self.strategy!r} nor optimizer {self.optimizer!r}; drop them or "
                "choose a method/strategy/optimizer that takes them"
            )
        object.__setattr__(
            self,
            "options",
            {
                key: tuple(value) if isinstance(value, list) else value
                for key, value in sorted(self.options.items())
            },
        )
        for strategy in parents_first():  # every strategy's options are checked: see option_specs
            strategy.from_options(self._server_values())
        self.build_optimizer()
        method = self.build_method()
        PretrainingPhase.check_method(
            self.build_pretraining(),
            method=self.method,
            private=method.private,
            personal=method.personal,
        )
        if self.rounds == 0 and not method.personalises():
            raise ValueError(
                "rounds must be >= 1: a run of 0 rounds trains nothing unless its method "
                "fine-tunes every client locally afterwards (the local-only preset)"
            )

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> TrainConfig:
        """A configuration from one flat mapping of fields and option keys (a preset's form).

        Args:
            values: field name or option key -> value.

        Returns:
            The validated configuration.
        """
        fields = {f.name for f in dataclasses.fields(cls)} - {"options"}
        options = {
            **values.get("options", {}),
            **{k: v for k, v in values.items() if k not in fields and k != "options"},
        }
        return cls(**{k: v for k, v in values.items() if k in fields}, options=options)

    def replace(self, **changes: Any) -> TrainConfig:
        """A copy with some fields or option keys changed (validated again)."""
        return TrainConfig.from_values({**self.flat(), **changes})

    def flat(self) -> dict[str, Any]:
        """Fields and set option keys in one mapping (the inverse of :meth:`from_values`)."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {**data.pop("options"), **data}

    def get(self, key: str) -> Any:
        """The value of a field or an option key in this run (``None`` when no component owns it).

        Args:
            key: a field name (``rounds``) or an option key (``lora_rank``, ``epsilon``).

        Returns:
            The value set, else the owning component's default.
        """
        if key in {f.name for f in dataclasses.fields(self)}:
            return getattr(self, key)
        spec = self.option_specs().get(key)
        if spec is None:
            return None
        return self.options.get(key, _default(spec))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (tuples become lists)."""
        data = dataclasses.asdict(self)
        data["options"] = {
            key: list(value) if isinstance(value, tuple) else value
            for key, value in self.options.items()
        }
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Inverse of :meth:`to_dict`.

        Raises:
            ValueError: for unknown keys.
        """
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown configuration keys {unknown}")
        return cls(**data)

    def option_specs(self) -> dict[str, OptionSpec]:
        """This run's options by key: its method's, optimiser's, pre-training's, every strategy's.

        The server's options are one set for the run, taken and checked whichever strategy it
        names: a run may pre-train with another strategy (``--fsp-strategy``) on the same
        momentum, betas and tau, and each strategy reads only the options it owns.
        """
        return run_option_specs(
            METHODS[self.method], *parents_first(), OPTIMIZERS[self.optimizer], PretrainingPhase
        )

    def build_strategy(self) -> Strategy:
        """The configured server strategy."""
        return STRATEGIES[self.strategy].from_options(self._server_values())

    def _server_values(self) -> dict[str, Any]:
        """The option values a strategy reads, with the run's clients per round."""
        return {**self.options, "clients_per_round": self.clients_per_round}

    def build_method(self) -> Method:
        """The configured client method."""
        run = RunShape(rounds=self.rounds, clients_per_round=self.clients_per_round)
        return METHODS[self.method].from_options(self.options, run=run)

    def build_optimizer(self) -> Optimizer:
        """The configured local optimiser."""
        return OPTIMIZERS[self.optimizer].from_options(self.options)

    def build_pretraining(self) -> PretrainingOptions:
        """The options of the federated pre-training phase (``fsp_rounds`` 0: none)."""
        return build_options(PretrainingOptions, self.options)

    def build_codec(self) -> WireCodec:
        """The configured wire format."""
        return get_codec(self.wire)


def _default(spec: OptionSpec) -> Any:
    """The default of an options field."""
    return next(f.default for f in dataclasses.fields(spec.owner) if f.name == spec.field)


def run_option_specs(*components: type) -> dict[str, OptionSpec]:
    """The options of some components, by key (fields of :class:`TrainConfig` left out).

    Args:
        *components: method, strategy or optimiser classes (their ``option_classes``).

    Returns:
        Key -> spec, the first component that declares a key naming it.
    """
    run_fields = {f.name for f in dataclasses.fields(TrainConfig)}
    specs: dict[str, OptionSpec] = {}
    for component in components:
        for cls in component.option_classes:
            for spec in option_specs(cls):
                if spec.key not in run_fields:
                    specs.setdefault(spec.key, spec)
    return specs


def all_option_specs() -> dict[str, OptionSpec]:
    """The options of every registered method, strategy and optimiser (``pflkit train``)."""
    return run_option_specs(
        *METHODS.values(), *parents_first(), *OPTIMIZERS.values(), PretrainingPhase
    )
