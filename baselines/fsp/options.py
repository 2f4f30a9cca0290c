"""The options of the federated self-pretraining phase (FSP), a component of every run.

A run with ``fsp_rounds`` > 0 first pre-trains the model on its clients' pages with the denoising
objectives (:mod:`baselines.fsp.objectives`), then fine-tunes it as configured. The pilot study
(section 5.2) pre-trains for 10 rounds with the fine-tuning's clients per round, and uses an
adaptive server optimiser during pre-training only (FedAdam or FedAvgM, then FedAvg), so the
phase has its own strategy and server learning rate, and may have its own local learning rate;
the other strategy options (momentum, betas, tau) and the local optimiser are the run's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from baselines.fsp.objectives import OBJECTIVES
from baselines.options import option
from baselines.strategies import STRATEGIES


@dataclass(frozen=True)
class PretrainingOptions:
    """Options of the pre-training phase."""

    key_prefix: ClassVar[str] = "fsp_"
    rounds: int = option(
        0,
        help="federated pre-training rounds before fine-tuning (0: none). Their messages are "
        "logged before the fine-tuning rounds' and count in the run's total bytes.",
    )
    objectives: tuple[str, ...] = option(
        tuple(OBJECTIVES),
        help="the denoising objectives, one drawn per page (tm: text, lm: layout, tlm: text "
        "and layout).",
    )
    clients_per_round: int | None = option(
        None, help="clients sampled per pre-training round (unset: the run's)."
    )
    strategy: str | None = option(
        None,
        choices=tuple(STRATEGIES),
        help="server strategy of the pre-training rounds (unset: the run's).",
    )
    server_lr: float | None = option(
        None,
        help="server learning rate of the pre-training rounds (unset: that strategy's default).",
    )
    lr: float | None = option(
        None, help="the clients' local learning rate while pre-training (unset: the run's)."
    )

    def __post_init__(self) -> None:
        if self.rounds < 0:
            raise ValueError(f"--fsp-rounds must be >= 0, got {self.rounds}")
        unknown = [name for name in self.objectives if name not in OBJECTIVES]
        if unknown or not self.objectives or len(set(self.objectives)) != len(self.objectives):
            raise ValueError(f"--fsp-objectives {','.join(self.objectives)}: give distinct "
                             f"names among {','.join(OBJECTIVES)}")
        if self.clients_per_round is not None and self.clients_per_round < 1:
            raise ValueError(f"--fsp-clients-per-round must be >= 1, got {self.clients_per_round}")
        if self.strategy is not None and self.strategy not in STRATEGIES:
            raise ValueError(f"--fsp-strategy {self.strategy!r}: choose one of {sorted(STRATEGIES)}")
        for flag, value in (("--fsp-server-lr", self.server_lr), ("--fsp-lr", self.lr)):
            if value is not None and not value > 0:
                raise ValueError(f"{flag} must be > 0, got {value}")


class PretrainingPhase:
    """The pre-training phase as a run component: it owns the ``fsp_*`` options."""

    option_classes: ClassVar[tuple[type, ...]] = (PretrainingOptions,)

    @staticmethod
    def check_method(options: PretrainingOptions, *, method: str, private: bool,
                     personal: bool) -> None:
        """Refuse pre-training where the run's track cannot account for it.

        Args:
            options: the phase's options.
            method: the run's method name.
            private: the method protects providers (track 2).
            personal: the method personalises (track 3).

        Raises:
            ValueError: pre-training with a private or personalising method.
        """
        if not options.rounds:
            return
        if private:
            raise ValueError(
                f"--fsp-rounds with the private method {method!r}: pre-training on the clients' "
                "documents without noise would spend privacy the declaration does not account for"
            )
        if personal:
            raise ValueError(f"--fsp-rounds with the personalising method {method!r} is not "
                             "supported (the engine pre-trains track-1 runs only)")
