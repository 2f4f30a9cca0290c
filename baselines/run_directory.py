"""The run directory: logs, metrics and resumable state, each written atomically.

Layout (the names uploaded are those of ``benchmark.submission_contract``)::

    RUN_DIR/config.json                 the run's TrainConfig (+ data and base paths)
    RUN_DIR/communication_log.csv       competition format, one row per message
    RUN_DIR/communication_log.jsonl     the same messages with names, format, size, SHA-256
    RUN_DIR/metrics.jsonl               one line per completed round (val ANLS, bytes, times)
    RUN_DIR/state/latest.json           pointer to the last completed round's state
    RUN_DIR/state/round-NNNN/           global weights, strategy state, the method's per-client
                                        state, log and metrics so far
    RUN_DIR/checkpoint/                 the final model (base architecture, safetensors)
    RUN_DIR/personal/                   track 3: client_{k}.safetensors, each client's tensors
                                        that differ from the checkpoint's
    RUN_DIR/submission.json             method, track, rounds, clients, byte totals

A round's state directory is complete before ``latest.json`` points to it (``os.replace``), so a
run interrupted at any moment resumes from its last completed round with the same result.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from baselines.core.communication_log import CommunicationLog
from benchmark.submission_contract import (
    CHECKPOINT_DIR,
    COMMUNICATION_DETAILS,
    COMMUNICATION_LOG,
    CONFIG_FILE,
    METRICS_FILE,
    STATE_DIR,
)

CLIENT_STATES = "clients.safetensors"


def atomic_write_text(path: Path, text: str) -> None:
    """Write a text file through a temporary file in the same directory and ``os.replace``.

    Args:
        path: destination.
        text: content.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, data: Any) -> None:
    """:func:`atomic_write_text` of indented JSON."""
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def replace_directory(source: Path, destination: Path) -> None:
    """Move a completed directory into place, removing an older one at the destination."""
    if destination.exists():
        old = destination.with_name(f".{destination.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(destination, old)
        os.replace(source, destination)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(source, destination)


@dataclass
class RunState:
    """What a completed round leaves behind.

    Attributes:
        federated_round: the last completed round.
        weights: global communicated weights (full precision).
        strategy_state: the strategy's saved tensors.
        log: every message up to this round.
        metrics: one dictionary per completed round.
        timing: cumulative seconds (``wall``, ``client_training``, ``evaluation``).
        client_states: client id -> the method's tensors for that client.
        personalised: the clients that finished their local work after the last round
            (``Method.personalise``), in order.
    """

    federated_round: int
    weights: dict[str, torch.Tensor]
    strategy_state: dict[str, torch.Tensor]
    log: CommunicationLog
    metrics: list[dict[str, Any]]
    timing: dict[str, float]
    client_states: dict[int, dict[str, torch.Tensor]] = field(default_factory=dict)
    personalised: list[int] = field(default_factory=list)


class RunDirectory:
    """Reads and writes one run directory.

    Args:
        path: the directory (created if missing).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    @property
    def checkpoint(self) -> Path:
        """Where the final model goes."""
        return self.path / CHECKPOINT_DIR

    def has_state(self) -> bool:
        """Whether a completed round was saved."""
        return (self.path / STATE_DIR / "latest.json").is_file()

    def is_empty(self) -> bool:
        """Whether the directory is missing or empty."""
        return not self.path.exists() or not any(self.path.iterdir())

    def read_config(self) -> dict[str, Any]:
        """The saved ``config.json``.

        Raises:
            FileNotFoundError: if there is none.
        """
        path = self.path / CONFIG_FILE
        if not path.is_file():
            raise FileNotFoundError(f"{path} does not exist: {self.path} is not a run directory")
        return json.loads(path.read_text(encoding="utf-8"))

    def write_config(self, config: dict[str, Any]) -> None:
        """Save ``config.json``."""
        atomic_write_json(self.path / CONFIG_FILE, config)

    def commit_round(self, state: RunState) -> None:
        """Save a completed round, then refresh the logs and metrics in the run directory.

        Args:
            state: the state after the round.
        """
        state_root = self.path / STATE_DIR
        state_root.mkdir(parents=True, exist_ok=True)
        name = f"round-{state.federated_round:04d}"
        tmp = Path(tempfile.mkdtemp(dir=state_root, prefix=f".{name}."))
        save_file({k: v.contiguous() for k, v in state.weights.items()}, tmp / "global.safetensors")
        save_file(
            {k: v.contiguous() for k, v in state.strategy_state.items()},
            tmp / "strategy.safetensors",
        )
        save_file(
            {
                f"{client}/{name}": tensor.contiguous()
                for client, tensors in state.client_states.items()
                for name, tensor in tensors.items()
            },
            tmp / CLIENT_STATES,
        )
        (tmp / COMMUNICATION_DETAILS).write_text(state.log.to_jsonl(), encoding="utf-8")
        (tmp / "progress.json").write_text(
            json.dumps(
                {
                    "round": state.federated_round,
                    "metrics": state.metrics,
                    "timing": state.timing,
                    "personalised": state.personalised,
                }
            ),
            encoding="utf-8",
        )
        replace_directory(tmp, state_root / name)
        atomic_write_json(state_root / "latest.json", {"round": state.federated_round, "dir": name})
        for old in state_root.glob("round-*"):
            if old.name != name:
                shutil.rmtree(old, ignore_errors=True)
        self.write_logs(state.log, state.metrics)

    def write_logs(self, log: CommunicationLog, metrics: list[dict[str, Any]]) -> None:
        """Write the communication logs and ``metrics.jsonl``."""
        atomic_write_text(self.path / COMMUNICATION_LOG, log.to_csv())
        atomic_write_text(self.path / COMMUNICATION_DETAILS, log.to_jsonl())
        atomic_write_text(
            self.path / METRICS_FILE,
            "".join(json.dumps(row, sort_keys=True) + "\n" for row in metrics),
        )

    def load_state(self) -> RunState:
        """The last completed round's state.

        Raises:
            FileNotFoundError: when no round was completed.
        """
        pointer = self.path / STATE_DIR / "latest.json"
        if not pointer.is_file():
            raise FileNotFoundError(
                f"{self.path} holds no completed round to resume from; start without --resume"
            )
        latest = json.loads(pointer.read_text(encoding="utf-8"))
        directory = self.path / STATE_DIR / latest["dir"]
        progress = json.loads((directory / "progress.json").read_text(encoding="utf-8"))
        return RunState(
            federated_round=int(latest["round"]),
            weights=load_file(directory / "global.safetensors"),
            strategy_state=load_file(directory / "strategy.safetensors"),
            log=CommunicationLog.from_jsonl(
                (directory / COMMUNICATION_DETAILS).read_text(encoding="utf-8")
            ),
            metrics=progress["metrics"],
            timing=progress["timing"],
            client_states=_client_states(directory / CLIENT_STATES),
            personalised=[int(client) for client in progress.get("personalised", [])],
        )


def _client_states(path: Path) -> dict[int, dict[str, torch.Tensor]]:
    """Per-client tensors saved as ``{client}/{name}`` (none in a run saved before they were)."""
    states: dict[int, dict[str, torch.Tensor]] = {}
    if path.is_file():
        for key, tensor in load_file(path).items():
            client, name = key.split("/", 1)
            states.setdefault(int(client), {})[name] = tensor
    return states
