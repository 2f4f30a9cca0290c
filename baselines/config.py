"""One configuration dataclass for a federated run, documented once."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from baselines.methods import METHODS, Method
from baselines.privacy.plan import PrivacyOptions
from baselines.strategies import STRATEGIES, Strategy, StrategyConfig, get_strategy
from baselines.wire import CODECS, WireCodec, get_codec


@dataclass(frozen=True)
class TrainConfig:
    """Everything that decides what a federated run computes.

    Attributes:
        preset: the recipe name the run started from (``fedavg``, ``lora``, ...).
        method: ``full`` or ``lora`` (what clients train and send).
        rounds: federated rounds.
        clients_per_round: M, clients sampled per round.
        local_epochs: epochs over the client's data per round.
        batch_size: local batch size.
        lr: local AdamW learning rate.
        weight_decay: local AdamW weight decay.
        max_grad_norm: local gradient clipping (``None``: none).
        wire: wire format of every message (``fp32`` or ``nf4``).
        strategy: server strategy (``fedavg``, ``fedavgm``, ``fedadam``, ``fedyogi``).
        weighted: weight client updates by their number of examples.
        server_lr: server learning rate (``None``: the strategy's default).
        server_momentum: FedAvgM's beta.
        beta1: FedAdam/FedYogi first-moment decay.
        beta2: FedAdam/FedYogi second-moment decay.
        tau: FedAdam/FedYogi adaptivity.
        lora_rank: LoRA rank r.
        lora_alpha: LoRA alpha (``None``: 2 r).
        lora_targets: module-name suffixes that get adapters.
        lora_scope: module prefix adapters are restricted to.
        lora_dropout: LoRA dropout.
        fully_trained: prefixes LoRA trains in full.
        frozen: prefixes full fine-tuning keeps frozen.
        seed: the run's seed (sampling, shuffling, adapters).
        val_limit: evaluate on the first N validation questions (``None``: all; 0: skip).
        eval_batch_size: batch size of validation.
        epsilon: DP methods: target epsilon per provider (``None``: from ``noise_multiplier``).
        delta: DP methods: target delta.
        noise_multiplier: DP methods: sigma (``None``: calibrated from ``epsilon``).
        clipping_norm: DP methods: L2 bound S of one provider's update.
        providers_per_round: DP methods: m, expected providers per sampled client per round
            (``None``: 50/400 of the fewest providers at a client, as in the reference).
        provider_sampling: DP methods: ``poisson`` or ``fixed``.
        privacy_analysis: DP methods: ``competition`` or ``strict`` sampling-rate analysis.
    """

    preset: str = "custom"
    method: str = "full"
    rounds: int = 10
    clients_per_round: int = 2
    local_epochs: int = 1
    batch_size: int = 16
    lr: float = 2e-4
    weight_decay: float = 0.0
    max_grad_norm: float | None = None
    wire: str = "fp32"
    strategy: str = "fedavg"
    weighted: bool = True
    server_lr: float | None = None
    server_momentum: float = 0.9
    beta1: float = 0.9
    beta2: float = 0.99
    tau: float = 1e-3
    lora_rank: int = 6
    lora_alpha: float | None = None
    lora_targets: tuple[str, ...] = ("q", "v")
    lora_scope: str = "language_backbone"
    lora_dropout: float = 0.0
    fully_trained: tuple[str, ...] = ("spatial_embedding.", "visual_embedding.visual_emb_matcher.")
    frozen: tuple[str, ...] = ("visual_embedding.image_model.",)
    seed: int = 0
    val_limit: int | None = None
    eval_batch_size: int = 32
    epsilon: float | None = None
    delta: float = 1e-5
    noise_multiplier: float | None = None
    clipping_norm: float = 0.5
    providers_per_round: int | None = None
    provider_sampling: str = "poisson"
    privacy_analysis: str = "competition"

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"unknown method {self.method!r}; choose one of {sorted(METHODS)}")
        if self.strategy not in STRATEGIES:
            raise ValueError(
                f"unknown strategy {self.strategy!r}; choose one of {sorted(STRATEGIES)}"
            )
        if self.wire not in CODECS:
            raise ValueError(f"unknown wire format {self.wire!r}; choose one of {sorted(CODECS)}")
        for name in ("rounds", "clients_per_round", "local_epochs", "batch_size", "lora_rank"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.val_limit is not None and self.val_limit < 0:
            raise ValueError(f"val_limit must be >= 0, got {self.val_limit}")
        self.strategy_config()  # validates the strategy options
        privacy = self.privacy_options()  # validates the DP options
        if getattr(METHODS[self.method], "private", False):
            privacy.require_budget()

    def replace(self, **changes: Any) -> TrainConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (tuples become lists)."""
        return {
            key: list(value) if isinstance(value, tuple) else value
            for key, value in dataclasses.asdict(self).items()
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Inverse of :meth:`to_dict`.

        Raises:
            ValueError: for unknown keys.
        """
        known = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ValueError(f"unknown configuration keys {unknown}")
        values = {
            key: tuple(value) if isinstance(value, list) else value for key, value in data.items()
        }
        return cls(**values)

    def strategy_config(self) -> StrategyConfig:
        """The strategy's share of the options."""
        return StrategyConfig(
            clients_per_round=self.clients_per_round,
            weighted=self.weighted,
            server_lr=self.server_lr,
            server_momentum=self.server_momentum,
            beta1=self.beta1,
            beta2=self.beta2,
            tau=self.tau,
        )

    def privacy_options(self) -> PrivacyOptions:
        """The DP methods' share of the options."""
        return PrivacyOptions(
            epsilon=self.epsilon,
            delta=self.delta,
            noise_multiplier=self.noise_multiplier,
            clipping_norm=self.clipping_norm,
            providers_per_round=self.providers_per_round,
            sampling=self.provider_sampling,
            analysis=self.privacy_analysis,
        )

    def build_strategy(self) -> Strategy:
        """The configured server strategy."""
        return get_strategy(self.strategy, self.strategy_config())

    def build_method(self) -> Method:
        """The configured client method (``METHODS[method].from_config``)."""
        return METHODS[self.method].from_config(self)

    def build_codec(self) -> WireCodec:
        """The configured wire format."""
        return get_codec(self.wire)
