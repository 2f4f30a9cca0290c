"""What a re-run says of a submission: reproduced exactly, within tolerance, or not, and where.

The comparison, in the order a lie would show first:

1. **The declarations.** The re-run writes its own ``submission.json`` and ``privacy.json``; the
   fields that describe how the run was trained (method, rounds, clients per round, epochs,
   strategy and server step, wire format, method options; every field of the privacy
   declaration) must equal the submitted ones. A recipe naming another preset, or a DP run
   declared at one noise and trained at another, stops here.
2. **The communication log**, row by row (round, sender, receiver, bytes).
3. **Every message's digest**, in order; the first message that differs is named with the
   first tensor that differs in it (the detailed log has one SHA-256 per tensor).
4. **The checkpoint's bytes**, then track 3's personal models' (the same clients, the same
   bytes).

On the recipe's own machine type and thread count, training is deterministic (the CPU pins
show it for every preset): all of them must be equal, and any difference is *not reproduced*. On
another machine type (or thread count) float rounding differs and the messages' digests with
it: the run is *reproduced within tolerance* when the declarations and the log are equal and
the re-run's checkpoint is within ``tolerance`` of the submitted one, measured as the distance
between the two models over the distance the re-run moved from the base (both Euclidean, over
every tensor). The tolerance is derived from measurements (``docs/organisers/reproduction.md``).
"""

from __future__ import annotations

import filecmp
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

EXACT = "reproduced exactly"
WITHIN = "reproduced within tolerance"
NOT_REPRODUCED = "not reproduced"
FAILED = "failed"
#: submission.json fields that say how a run was trained (the rest are measurements of it; the
#: base is checked by its weights' digest before the re-run)
DECLARED_FIELDS = ("method", "rounds", "clients_per_round", "local_epochs", "strategy",
                   "server", "wire_format", "method_options", "communicated_parameters",
                   "total_bytes", "track")  # fmt: skip
#: the largest ratio of model distance to the re-run's change from the base accepted across
#: machine types: above the 0.067 an honest ``fedavg`` run of the preset's length reaches on
#: ``mini`` with two threads instead of one (docs/results/reproduction.md)
DEFAULT_TOLERANCE = 0.1


@dataclass(frozen=True)
class RunFiles:
    """The files of one run that the comparison reads (absent ones are ``None``)."""

    log: Path
    details: Path
    model: Path
    metadata: Path
    privacy: Path | None = None
    personal: Path | None = None

    @classmethod
    def of_run_directory(cls, run: Path) -> RunFiles:
        """A run directory's files, as ``pflkit train`` writes them."""
        privacy, personal = run / "privacy.json", run / "personal"
        return cls(run / "communication_log.csv", run / "communication_log.jsonl",
                   run / "checkpoint" / "model.safetensors", run / "submission.json",
                   privacy if privacy.is_file() else None,
                   personal if personal.is_dir() else None)  # fmt: skip

    @classmethod
    def of_stored_submission(cls, directory: Path) -> RunFiles:
        """A submission's files as the evaluator stores them."""
        privacy, personal = directory / "privacy.json", directory / "personal"
        return cls(directory / "communication_log.csv", directory / "communication_log.jsonl",
                   directory / "model.safetensors", directory / "metadata.json",
                   privacy if privacy.is_file() else None,
                   personal if personal.is_dir() else None)  # fmt: skip

    def personal_files(self) -> dict[str, Path]:
        """Track 3's personal models by file name (none for other tracks)."""
        if self.personal is None:
            return {}
        return {path.name: path for path in sorted(self.personal.glob("*.safetensors"))}


@dataclass(frozen=True)
class Verdict:
    """The outcome of a re-run.

    Attributes:
        outcome: :data:`EXACT`, :data:`WITHIN`, :data:`NOT_REPRODUCED` or :data:`FAILED`.
        reason: a sentence saying why (where it differs, what failed).
        where: the first difference: round, sender, receiver, tensor (what is known of them).
        figures: the measured distances, the tolerance, the recomputed byte totals.
    """

    outcome: str
    reason: str
    where: dict[str, Any] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def reproduced(self) -> bool:
        """Whether the submission may be ranked on this verdict."""
        return self.outcome in (EXACT, WITHIN)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {**asdict(self), "reproduced": self.reproduced}


def _json(path: Path | None) -> dict[str, Any]:
    return {} if path is None else json.loads(path.read_text(encoding="utf-8"))


def _declarations(submitted: RunFiles, rerun: RunFiles) -> Verdict | None:
    """A verdict when a declared field differs, else ``None``."""
    theirs, ours = _json(submitted.metadata), _json(rerun.metadata)
    for key in DECLARED_FIELDS:
        if theirs.get(key) != ours.get(key):
            return Verdict(NOT_REPRODUCED, f"submission.json's {key} is {theirs.get(key)!r}, but "
                           f"the recipe trains {ours.get(key)!r}", {"file": "submission.json",
                                                                    "field": key})  # fmt: skip
    if (submitted.privacy is None) != (rerun.privacy is None):
        has = "has" if submitted.privacy is not None else "has no"
        return Verdict(NOT_REPRODUCED, f"the submission {has} privacy declaration, the recipe's "
                       "run the opposite", {"file": "privacy.json"})  # fmt: skip
    declared, trained = _json(submitted.privacy), _json(rerun.privacy)
    for key in sorted(set(declared) | set(trained)):
        if declared.get(key) != trained.get(key):
            return Verdict(NOT_REPRODUCED, f"privacy.json declares {key} {declared.get(key)!r}, "
                           f"but the recipe trains with {trained.get(key)!r}",
                           {"file": "privacy.json", "field": key})  # fmt: skip
    return None


def _log_rows(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines()[1:]
            if line.strip()]  # fmt: skip


def _messages(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]  # fmt: skip


def _first_message_difference(submitted: Path, rerun: Path) -> dict[str, Any] | None:
    """Round, endpoints and first tensor of the first message whose digest differs."""
    for number, (theirs, ours) in enumerate(zip(_messages(submitted), _messages(rerun),
                                                strict=False), start=1):  # fmt: skip
        if theirs.get("sha256") == ours.get("sha256"):
            continue
        where = {"message": number, "round": ours.get("federated_round"),
                 "sender": ours.get("sender"), "receiver": ours.get("receiver")}  # fmt: skip
        names = ours.get("parameters", [])
        mine, other = ours.get("tensor_sha256", []), theirs.get("tensor_sha256", [])
        if len(mine) == len(names) and theirs.get("parameters") == names and len(other) == len(names):
            differing = [name for name, a, b in zip(names, other, mine, strict=True) if a != b]
            where["tensor"] = differing[0] if differing else None
            where["tensors_differing"] = len(differing)
        return where
    return None


def model_distance(submitted: Path, rerun: Path, base: Path) -> dict[str, float]:
    """The Euclidean distance between two checkpoints, and the re-run's from the base."""
    from safetensors import safe_open

    apart = moved = 0.0
    with safe_open(str(submitted), "pt") as a, safe_open(str(rerun), "pt") as b, \
            safe_open(str(base), "pt") as c:  # fmt: skip
        if set(a.keys()) != set(b.keys()):
            return {"apart": math.inf, "moved": 0.0, "ratio": math.inf}
        base_names = set(c.keys())
        for name in a.keys():
            x, y = a.get_tensor(name).double(), b.get_tensor(name).double()
            apart += float(((x - y) ** 2).sum())
            if name in base_names and c.get_slice(name).get_shape() == list(y.shape):
                moved += float(((y - c.get_tensor(name).double()) ** 2).sum())
    apart, moved = math.sqrt(apart), math.sqrt(moved)
    return {"apart": apart, "moved": moved, "ratio": apart / moved if moved > 0 else math.inf}


def compare(submitted: RunFiles, rerun: RunFiles, *, base_model: Path, same_machine: bool,
            tolerance: float = DEFAULT_TOLERANCE) -> Verdict:  # fmt: skip
    """The verdict of a re-run (module docstring).

    Args:
        submitted: the submission's files.
        rerun: the re-run's files.
        base_model: the base checkpoint's weights (for the change from the base).
        same_machine: the re-run ran on the recipe's machine type and thread count.
        tolerance: the largest model distance over the change from the base accepted across
            machines.
    """
    figures = {"official_logger_total_bytes": sum(
        int(m.get("official_logger_bytes", 0)) for m in _messages(rerun.details))}
    declared = _declarations(submitted, rerun)
    if declared is not None:
        return Verdict(declared.outcome, declared.reason, declared.where, figures)
    theirs, ours = _log_rows(submitted.log), _log_rows(rerun.log)
    if theirs != ours:
        index = next((i for i, (a, b) in enumerate(zip(theirs, ours, strict=False)) if a != b),
                     min(len(theirs), len(ours)))  # fmt: skip
        return Verdict(NOT_REPRODUCED, f"communication log row {index + 1}: submitted "
                       f"{theirs[index] if index < len(theirs) else 'nothing'!r}, re-run "
                       f"{ours[index] if index < len(ours) else 'nothing'!r}",
                       {"file": "communication_log.csv", "row": index + 1}, figures)  # fmt: skip
    difference = _first_message_difference(submitted.details, rerun.details)
    if difference is not None and same_machine:
        return Verdict(NOT_REPRODUCED, _where_text(difference) + " differs on the recipe's own "
                       "machine type, where training is deterministic", difference, figures)
    if difference is None and not _same_bytes(submitted.model, rerun.model):
        figures.update(model_distance(submitted.model, rerun.model, base_model))
        return Verdict(NOT_REPRODUCED, "every message is the re-run's, but the checkpoint is not "
                       "the model they produce: it was changed after training",
                       {"file": "model.safetensors"}, figures)  # fmt: skip
    personal = _first_personal_difference(submitted, rerun)
    if personal is not None and (same_machine or personal["file"] == "personal"):
        return Verdict(NOT_REPRODUCED, f"{personal['file']}: {personal['why']}",
                       {"file": personal["file"]}, figures)  # fmt: skip
    if difference is None:
        return Verdict(EXACT, "the same log, message digests, checkpoint and personal models",
                       {}, figures)  # fmt: skip
    distance = model_distance(submitted.model, rerun.model, base_model)
    figures.update(distance, tolerance=tolerance)
    if distance["ratio"] <= tolerance:
        return Verdict(WITHIN, "another machine type or thread count: the checkpoints are "
                       f"{distance['ratio']:.2e} of the change from the base apart (tolerance "
                       f"{tolerance})", difference, figures)  # fmt: skip
    return Verdict(NOT_REPRODUCED, f"{_where_text(difference)} differs and the checkpoints are "
                   f"{distance['ratio']:.3g} of the change from the base apart (tolerance "
                   f"{tolerance})", difference, figures)  # fmt: skip


def _first_personal_difference(submitted: RunFiles, rerun: RunFiles) -> dict[str, str] | None:
    """Where track 3's personal models first differ (the whole folder when the clients
    differ), or None. Across machine types only the set of clients is compared."""
    theirs, ours = submitted.personal_files(), rerun.personal_files()
    if theirs.keys() != ours.keys():
        return {"file": "personal", "why": f"the submission has {len(theirs)} personal models, "
                f"the recipe trains {len(ours)} others"}  # fmt: skip
    for name, path in theirs.items():
        if not _same_bytes(path, ours[name]):
            return {"file": f"personal/{name}", "why": "not the model the recipe trains"}
    return None


def _same_bytes(a: Path, b: Path) -> bool:
    """Whether two files hold the same bytes, read in chunks (a real-size checkpoint is 1.3 GB)."""
    return filecmp.cmp(a, b, shallow=False)


def _where_text(where: Mapping[str, Any]) -> str:
    text = (f"message {where['message']} (round {where['round']}, {where['sender']} to "
            f"{where['receiver']})")  # fmt: skip
    if where.get("tensor"):
        text += f", tensor {where['tensor']},"
    return text
