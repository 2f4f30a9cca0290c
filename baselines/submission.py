"""The submission a run produces: the merged checkpoint and ``submission.json``."""

from __future__ import annotations

import copy
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from torch import nn

from baselines.communication import CommunicationLog
from baselines.config import TrainConfig
from baselines.methods import Method
from baselines.run_directory import RunDirectory, atomic_write_json, replace_directory
from benchmark.tracks import COMMUNICATION, PRIVACY


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

    Returns:
        The content written to ``submission.json``.
    """
    exported = method.export(copy.deepcopy(model))
    tmp = Path(tempfile.mkdtemp(dir=run_dir.path, prefix=".checkpoint."))
    try:
        save_model(exported, tmp)
        replace_directory(tmp, run_dir.checkpoint)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    declaration = method.privacy_declaration()
    if declaration is not None:
        atomic_write_json(run_dir.path / "privacy.json", declaration)
    directions = log.bytes_by_direction()
    sizes = sorted({record.amount_of_bytes for record in log.records})
    last = metrics[-1] if metrics else {}
    submission = {
        "method": config.preset,
        "track": COMMUNICATION.number if declaration is None else PRIVACY.number,
        "rounds": config.rounds,
        "clients": num_clients,
        "clients_per_round": config.clients_per_round,
        "local_epochs": config.local_epochs,
        "strategy": config.strategy,
        "wire_format": config.wire,
        "method_options": method.describe(),
        "messages": len(log.records),
        "total_bytes": log.total_bytes(),
        "official_logger_total_bytes": log.official_logger_total(),
        "bytes_downlink": directions["down"],
        "bytes_uplink": directions["up"],
        "bytes_per_message": sizes[0] if len(sizes) == 1 else sizes,
        "val_anls": last.get("val_anls"),
        "checkpoint": "checkpoint",
        **info,
    }
    atomic_write_json(run_dir.path / "submission.json", submission)
    return submission
