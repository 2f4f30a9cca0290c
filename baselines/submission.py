"""The submission a run produces: the merged checkpoint, ``submission.json`` and, for track 3,
``personal/client_{k}.safetensors`` (each client's tensors that differ from the checkpoint's)."""

from __future__ import annotations

import copy
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from torch import nn

from baselines.config import TrainConfig
from baselines.core.communication_log import CommunicationLog
from baselines.methods import Method
from baselines.run_directory import RunDirectory, atomic_write_json, replace_directory
from baselines.strategies.fedavgm import FedAvgM
from benchmark.model.checkpoint import disk_state_dict
from benchmark.model.personalisation import personalisation_delta, write_personalisations
from benchmark.privacy_file import write_privacy_file
from benchmark.submission_contract import (
    CHECKPOINT_DIR,
    PERSONAL_DIR,
    PRIVACY_FILE,
    SUBMISSION_FILE,
)
from benchmark.tracks import TRACKS, Track


def write_submission(
    run_dir: RunDirectory,
    *,
    config: TrainConfig,
    method: Method,
    model: nn.Module,
    log: CommunicationLog,
    metrics: list[dict[str, Any]],
    num_clients: int,
    save_model: Callable[[nn.Module, Path], None],
    info: dict[str, Any],
    personal_model: Callable[[int], nn.Module] | None = None,
) -> dict[str, Any]:
    """Export the final model in the base architecture and describe the run.

    Args:
        run_dir: the run directory.
        config: the run's configuration.
        method: the method (its ``export`` merges adapters).
        model: the trained model (left untouched: a copy is exported).
        log: every message of the run.
        metrics: per-round metrics.
        num_clients: K.
        save_model: writes a base-architecture model to a directory.
        info: extra fields for ``submission.json``.
        personal_model: client -> its personal model (a copy, the method's ``personal_model``);
            given, the run is a track-3 submission and ``personal/`` is written.

    Returns:
        The content written to ``submission.json``.
    """
    # exported from a CPU copy: the checkpoint is the same fp32 file whatever device trained
    exported = method.export(copy.deepcopy(model).cpu())
    tmp = Path(tempfile.mkdtemp(dir=run_dir.path, prefix=".checkpoint."))
    try:
        save_model(exported, tmp)
        replace_directory(tmp, run_dir.checkpoint)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    declaration = method.privacy_declaration()
    if declaration is not None:
        write_privacy_file(run_dir.path / PRIVACY_FILE, declaration)
    personal = None
    if personal_model is not None:
        personal = write_personal(run_dir, method, exported, personal_model, num_clients)
        after = [r for r in log.records if r.federated_round > config.rounds]
        personal["log_round"] = config.rounds + 1 if after else None
    directions = log.bytes_by_direction()
    sizes = sorted({record.amount_of_bytes for record in log.records})
    last = metrics[-1] if metrics else {}
    submission = {
        "method": config.preset,
        "track": run_track(_written_parts(declaration, personal)).number,
        "rounds": config.rounds,
        "clients": num_clients,
        "clients_per_round": config.clients_per_round,
        "local_epochs": config.local_epochs,
        "strategy": config.strategy,
        "server": server_step(config),
        "wire_format": config.wire,
        "method_options": method.describe(),
        "messages": len(log.records),
        "total_bytes": log.total_bytes(),
        "official_logger_total_bytes": log.official_logger_total(),
        "bytes_downlink": directions["down"],
        "bytes_uplink": directions["up"],
        "bytes_per_message": sizes[0] if len(sizes) == 1 else (sizes or 0),
        "val_anls": last.get("val_anls"),
        "checkpoint": CHECKPOINT_DIR,
        **({} if personal is None else {"personal": personal}),
        **info,
    }
    atomic_write_json(run_dir.path / SUBMISSION_FILE, submission)
    return submission


def _written_parts(declaration: dict[str, Any] | None, personal: dict[str, Any] | None) -> set[str]:
    """The upload parts a run writes: the checkpoint, logs and metadata, and the privacy
    declaration and personalisations when its method has them."""
    written = {"model", "communication_log", "communication_details", "metadata"}
    return written | {name for name, value in (("privacy", declaration), ("personal", personal))
                      if value is not None}  # fmt: skip


def server_step(config: TrainConfig) -> dict[str, Any]:
    """The server's step as ``submission.json`` states it (track 2's noise floor reads it:
    ``evaluator.validation.noise_floor``).

    Args:
        config: the run's configuration.

    Returns:
        ``{"strategy", "lr", "momentum"}``: the strategy's name, its learning rate in use and
        its server momentum (0 unless the strategy keeps one).
    """
    strategy = config.build_strategy()
    momentum = strategy.config.server_momentum if isinstance(strategy, FedAvgM) else 0.0
    return {"strategy": config.strategy, "lr": float(strategy.server_lr),
            "momentum": float(momentum)}  # fmt: skip


def run_track(written: set[str]) -> Track:
    """The track of a run that wrote these upload parts: the track with the most parts among
    those whose parts were all written, the later track on a tie (a run with a privacy
    declaration and personalisations is a track-3 run).

    Args:
        written: the parts the run wrote (``benchmark.submission_contract.PARTS`` keys).

    Returns:
        The track (track 3 with personalisations, track 2 with a privacy declaration, else
        track 1).

    Raises:
        ValueError: no track takes these parts.
    """
    fitting = [track for track in TRACKS.values() if set(track.parts) <= written]
    if not fitting:
        raise ValueError(f"no track takes a submission of the parts {sorted(written)}")
    return max(fitting, key=lambda track: (len(track.parts), track.number))


def write_personal(
    run_dir: RunDirectory,
    method: Method,
    exported: nn.Module,
    personal_model: Callable[[int], nn.Module],
    num_clients: int,
) -> dict[str, Any]:
    """Write ``personal/client_{k}.safetensors``: each client's tensors that differ from the
    exported global model's, under the checkpoint's names (empty: the client uses the global
    model). One personal model is built at a time.

    Args:
        run_dir: the run directory.
        method: the method (its ``export`` merges adapters of a personal model too).
        exported: the global model in the base architecture (as in ``checkpoint/``).
        personal_model: client -> its personal model (a copy).
        num_clients: K.

    Returns:
        ``submission.json``'s ``personal``: the directory, the clients whose personalisation
        is not empty, the tensors each replaces and the bytes of the files.
    """
    global_tensors = disk_state_dict(exported)
    tensors: list[int] = []

    def delta(client: int) -> dict[str, Any]:
        personal = method.export(personal_model(client))
        changed = personalisation_delta(global_tensors, disk_state_dict(personal))
        tensors.append(len(changed))
        return changed

    directory = write_personalisations(run_dir.path / PERSONAL_DIR, delta, num_clients)
    return {
        "directory": PERSONAL_DIR,
        "personalised_clients": sum(1 for n in tensors if n),
        "tensors_per_client": tensors,
        "bytes": sum(p.stat().st_size for p in directory.iterdir()),
    }
