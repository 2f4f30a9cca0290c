"""A run with a federated pre-training phase before fine-tuning, in one log.

:func:`build_federation` gives ``pflkit train`` the plain :class:`FederatedSimulation` when
``fsp_rounds`` is 0 and a :class:`PretrainedFederation` otherwise. The phase is a federated
simulation of its own, on the pre-training task (:mod:`baselines.fsp_phase.task`), with its rounds,
clients per round and strategy, saved under ``RUN_DIR/pretraining/`` (state, its own logs and
its checkpoint without the added rows, resumable); its seed is derived from the run's, so its
sampling is a stream of its own. Fine-tuning then starts from the pre-trained weights (the added
rows cut off) and continues the same communication log:

- pre-training rounds are log rounds ``1..P``, fine-tuning round ``r`` is log round ``P + r``
  (:class:`LaterRoundsServer`), so ``communication_log.csv`` holds every message and the total
  bytes, track 1's ranking figure, include the pre-training's;
- fine-tuning round ``r`` samples the clients and seeds the local training exactly as round ``r``
  of the same run without pre-training, so the two differ only in where they start;
- ``submission.json`` declares the phase (``pretraining``: rounds, clients per round, strategy,
  objectives, the log rounds), which the evaluator checks the log against.

Only the in-process engine runs the phase.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from baselines.config import TrainConfig
from baselines.core.client_update import ClientUpdate
from baselines.core.communication_log import CommunicationLog
from baselines.core.parameters import get_values, set_values
from baselines.core.task import FederatedTask
from baselines.engine.server import FederatedServer
from baselines.engine.simulation import FederatedSimulation, RunSummary
from baselines.fsp.vocabulary import without_denoising_rows
from baselines.fsp_phase.task import build_pretraining_task
from baselines.run_directory import RunDirectory
from baselines.wire import EncodedMessage
from benchmark.model.families import DEFAULT_FAMILY, family_named

#: the phase's sub-directory of the run directory.
PRETRAINING_DIR = "pretraining"
#: The model families the phase can pre-train: its objectives read OCR words and boxes.
PRETRAINED_FAMILIES = ("vt5",)
#: the embedding every pre-training message must carry (the added rows live in it).
EMBEDDING = "language_backbone.shared.weight"


def pretraining_seed(seed: int) -> int:
    """The pre-training phase's seed, a stream apart from the fine-tuning's."""
    return int(np.random.SeedSequence([seed, 0xF5]).generate_state(1)[0] % 2**31)


def pretraining_config(config: TrainConfig) -> TrainConfig:
    """The phase's configuration: the run's, with the phase's rounds, clients, strategy and lr.

    Args:
        config: the run's configuration (``fsp_rounds`` > 0).

    Returns:
        A configuration of ``fsp_rounds`` rounds without pre-training of its own and without
        validation.
    """
    phase = config.build_pretraining()
    local = {} if phase.lr is None else {"lr": phase.lr}
    return config.replace(
        rounds=phase.rounds,
        clients_per_round=phase.clients_per_round or config.clients_per_round,
        strategy=phase.strategy or config.strategy,
        server_lr=phase.server_lr,
        seed=pretraining_seed(config.seed),
        val_limit=0,
        fsp_rounds=0,
        **local,
    )


class LaterRoundsServer(FederatedServer):
    """A server whose round ``r`` is logged as round ``offset + r`` (after pre-training).

    Sampling and the clients' seeds still use ``r``.

    Args:
        server: the server to take the strategy, channel, K and seed from.
        offset: the rounds logged before (P).
    """

    def __init__(self, server: FederatedServer, *, offset: int) -> None:
        super().__init__(
            server.strategy, server.channel, num_clients=server.num_clients, seed=server.seed
        )
        self.offset = offset

    def receive(
        self,
        federated_round: int,
        client: int,
        broadcast: EncodedMessage,
        reply: EncodedMessage,
        num_examples: int,
        metrics: dict[str, float],
    ) -> ClientUpdate:
        """:meth:`FederatedServer.receive`, logged in round ``offset + federated_round``."""
        return super().receive(
            self.offset + federated_round, client, broadcast, reply, num_examples, metrics
        )

    def lost(self, federated_round: int, client: int, broadcast: EncodedMessage) -> None:
        """:meth:`FederatedServer.lost`, logged in round ``offset + federated_round``."""
        super().lost(self.offset + federated_round, client, broadcast)

    def round_row(
        self,
        federated_round: int,
        clients: list[int],
        results: Sequence[ClientUpdate],
        log_start: int,
    ) -> dict[str, Any]:
        """The round's metrics row, with its ``log_round``."""
        row = super().round_row(federated_round, clients, results, log_start)
        row["log_round"] = self.offset + federated_round
        return row


class PretrainedFederation(FederatedSimulation):
    """Fine-tuning after a federated pre-training phase, both in one communication log.

    Args:
        config: the run's configuration (``fsp_rounds`` > 0).
        task: the fine-tuning task.
        run_dir: the run directory (the phase's lives in its ``pretraining/``).
        pretraining_task: the phase's task (:func:`~baselines.fsp_phase.task.build_pretraining_task`).
        progress: show progress bars.

    Raises:
        ValueError: when the method does not communicate the token embedding (the added rows
            could not be trained), or the configuration does not fit the task.
    """

    def __init__(
        self,
        config: TrainConfig,
        task: FederatedTask,
        run_dir: RunDirectory,
        *,
        pretraining_task: FederatedTask,
        progress: bool = True,
    ) -> None:
        phase_config = pretraining_config(config)
        declared = {
            **declaration(phase_config, config),
            "added_tokens": pretraining_task.info["added_tokens"],
        }
        super().__init__(
            config,
            dataclasses.replace(task, info={**task.info, "pretraining": declared}),
            run_dir,
            progress=progress,
        )
        self.pretraining = FederatedSimulation(
            phase_config,
            pretraining_task,
            RunDirectory(run_dir.path / PRETRAINING_DIR),
            progress=progress,
        )
        if EMBEDDING not in self.pretraining.parameters.names:
            raise ValueError(
                f"--fsp-rounds needs a method that trains and sends the token embedding "
                f"({EMBEDDING}), where the sentinel and location tokens are added; "
                f"{config.method!r} does not (use --method full, the fedavg preset's)"
            )
        self.server: LaterRoundsServer = LaterRoundsServer(self.server, offset=phase_config.rounds)
        self.pretraining_summary: RunSummary | None = None

    def run(self, *, resume: bool = False) -> RunSummary:
        """Run (or continue) the pre-training phase, then fine-tuning, and write the submission.

        Args:
            resume: continue from the last completed round of either phase.

        Returns:
            The fine-tuning summary (its byte totals include the pre-training's messages).
        """
        self.pretraining_summary = self.pretraining.run(resume=resume)
        if not (resume and self.run_dir.has_state()):
            weights = get_values(self.pretraining.model, self.pretraining.parameters)
            set_values(
                self.model,
                self.parameters,
                without_denoising_rows(weights, dict(self.parameters.shapes)),
            )
            self.channel.log = CommunicationLog(self.pretraining.channel.log.records)
        return super().run(resume=resume)

    def run_record(self, summary: RunSummary) -> dict[str, Any]:
        """The fine-tuning record (a fine-tuning message's bytes), with the phase's bytes and
        wall time and the run's wall time."""
        record = super().run_record(summary)
        later = [r for r in self.channel.log.records if r.federated_round > self.server.offset]
        if later:
            record["bytes_per_message"] = later[0].amount_of_bytes
        phase = self.pretraining_summary
        if phase is not None:
            record["pretraining"] = {
                "rounds": phase.rounds,
                "total_bytes": phase.total_bytes,
                "wall_seconds": round(phase.timing["wall"], 2),
            }
            record["total_wall_seconds"] = round(phase.timing["wall"] + summary.timing["wall"], 2)
        return record


def declaration(phase: TrainConfig, config: TrainConfig) -> dict[str, Any]:
    """``submission.json``'s ``pretraining``: what the evaluator checks the log against.

    Args:
        phase: the phase's configuration.
        config: the run's.

    Returns:
        Rounds, clients per round, strategy, server and local learning rates, objectives and
        the log rounds.
    """
    return {
        "rounds": phase.rounds,
        "clients_per_round": phase.clients_per_round,
        "strategy": phase.strategy,
        "server_lr": phase.build_strategy().server_lr,
        "lr": phase.get("lr"),
        "objectives": list(config.build_pretraining().objectives),
        "log_rounds": [1, phase.rounds],
    }


def build_federation(
    config: TrainConfig,
    task: FederatedTask,
    run_dir: RunDirectory,
    *,
    data_dir: str | Path,
    base: str | Path,
    progress: bool = True,
) -> FederatedSimulation:
    """The run's federation: with a pre-training phase when ``fsp_rounds`` > 0.

    Args:
        config: the run's configuration.
        task: the fine-tuning task.
        run_dir: the run directory.
        data_dir: the data directory (the phase reads the clients' pages from it).
        base: the checkpoint every party starts from.
        progress: show progress bars.

    Returns:
        The simulation to run.
    """
    phase = config.build_pretraining()
    if not phase.rounds:
        return FederatedSimulation(config, task, run_dir, progress=progress)
    family = task.info.get("family", DEFAULT_FAMILY)
    if family not in PRETRAINED_FAMILIES:
        raise ValueError(
            f"federated self-pretraining (--fsp-rounds) is written for VT5's OCR words and boxes; "
            f"--base is a {family_named(family).title} checkpoint: drop --fsp-rounds or train "
            "a VT5 base"
        )
    pretraining_task = build_pretraining_task(
        data_dir,
        base,
        objectives=phase.objectives,
        seed=config.seed,
        info={"data_dir": str(Path(data_dir).resolve()), "base": str(base)},
    )
    return PretrainedFederation(
        config, task, run_dir, pretraining_task=pretraining_task, progress=progress
    )
