"""What the service checks about its own benchmark before it scores: the base model against each
track's threshold, and whether the privacy audit can run.

Two set-ups let a submission rank without earning it, and neither shows in any one submission:

- **A threshold at or below the base.** Track 1 ranks by bytes among submissions whose test
  ANLS reaches the threshold. If the base every run starts from already reaches it, the
  untouched base with a log of 1-byte messages ranks first. The worker scores the base once at
  start-up (:func:`check_readiness`) and refuses to start when the threshold in force of any
  thresholded track is at or below that score; ``pflkit data threshold`` refuses to store such a value; the organiser page
  shows the base's score and warns in red when the threshold (which may change while the
  service runs) is at or below it.
- **A benchmark without canaries.** The one-run audit (:mod:`evaluator.canary_audit`) needs the
  organisers' canary files; without them it cannot run. The worker logs it at start-up, the
  organiser page says it, and the track-2 page says that its claims are then checked
  arithmetically and by the noise floor only (:func:`track2_checks`).

The worker records what it found in ``STORAGE/readiness.json`` (written atomically), which the
pages read.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmark.tracks import COMMUNICATION, TRACKS, Track
from evaluator.canary_audit import COINS_FILE, PROBES_FILE

logger = logging.getLogger("evaluator.readiness")
FILENAME = "readiness.json"


class ThresholdAtOrBelowBase(RuntimeError):
    """A track's threshold does not exceed the base model's own test ANLS."""


@dataclass(frozen=True)
class Readiness:
    """What the worker found at start-up.

    Attributes:
        base_test_anls: the base (reference) model's test ANLS.
        threshold: the track-1 threshold in force then.
        threshold_source: where it came from (a ``benchmark.json`` path or ``setting``).
        canaries: whether the benchmark holds the audit's canary files.
        checked_at: when (UTC, ISO 8601).
        thresholds: every thresholded track's ``[threshold, source]`` then, by track number
            (as text: the file is JSON).
    """

    base_test_anls: float
    threshold: float
    threshold_source: str
    canaries: bool
    checked_at: str
    thresholds: dict[str, list[Any]] = field(default_factory=dict)


def canaries_present(data_dir: Path | None) -> bool:
    """Whether a benchmark directory holds the organisers' canary files (the audit can run).

    Args:
        data_dir: the benchmark directory.

    Returns:
        True when ``evaluator/canaries.json`` and ``evaluator/imdb_canaries.npy`` exist.
    """
    if data_dir is None:
        return False
    directory = Path(data_dir) / "evaluator"
    return (directory / COINS_FILE).is_file() and (directory / PROBES_FILE).is_file()


def threshold_problem(threshold: float, base_test_anls: float | None,
                      track: Track = COMMUNICATION) -> str | None:  # fmt: skip
    """Why a track's threshold cannot be used with this base, or None when it can.

    Args:
        threshold: the track's threshold.
        base_test_anls: the base model's test ANLS (None: not measured yet).
        track: a thresholded track (track 1 by default).

    Returns:
        A sentence naming both numbers and what to do, or None.
    """
    if base_test_anls is None or threshold > base_test_anls:
        return None
    if track is COMMUNICATION:
        how = ("pflkit data threshold DIR --run RUN, from the organisers' fedavg run, or "
               f"{track.threshold_setting}")  # fmt: skip
    else:
        how = f"{track.threshold_key} in benchmark.json" + (
            f" or {track.threshold_setting}" if track.threshold_setting else "")
    return (
        f"the track-{track.number} threshold {threshold:.4f} is at or below the base model's own "
        f"test ANLS {base_test_anls:.4f}: the untouched base with a log of 1-byte messages would "
        f"rank first; set a threshold above it ({how})"
    )


def threshold_problems(thresholds: Mapping[int, tuple[float, str]], base_test_anls: float | None
                       ) -> list[str]:  # fmt: skip
    """:func:`threshold_problem` of every thresholded track, in track order."""
    problems = [threshold_problem(value, base_test_anls, TRACKS[number])
                for number, (value, _) in sorted(thresholds.items()) if number in TRACKS]
    return [problem for problem in problems if problem is not None]


def track2_checks(canaries: bool) -> str:
    """What the evaluator checks of a track-2 claim, for the pages (one place with the checks).

    Args:
        canaries: whether the benchmark holds canaries (the audit runs).

    Returns:
        A sentence.
    """
    base = ("arithmetically (the accountant recomputes epsilon from the declaration, and the "
            "declaration must match the log and the benchmark) and by the noise floor (the "
            "change of the communicated coordinates from the base must carry the energy of the "
            "declared Gaussian noise)")  # fmt: skip
    if canaries:
        return (f"Claims are checked {base}, and by the one-run canary audit, which flags a "
                "claim its lower bound contradicts.")  # fmt: skip
    return (f"Claims are checked {base} only: this benchmark has no canaries, so the one-run "
            "privacy audit cannot run.")  # fmt: skip


def write_readiness(storage_dir: Path, readiness: Readiness) -> Path:
    """Store what the worker found, atomically (``STORAGE/readiness.json``).

    Args:
        storage_dir: the service's storage directory.
        readiness: the findings.

    Returns:
        The file written.
    """
    path = Path(storage_dir) / FILENAME
    staging = path.with_name(f".{FILENAME}.{os.getpid()}.tmp")
    staging.write_text(json.dumps(asdict(readiness), indent=1) + "\n", encoding="utf-8")
    os.replace(staging, path)
    return path


def read_readiness(storage_dir: Path | None) -> Readiness | None:
    """What a worker found at its last start, or None when no worker has written it (or the
    file cannot be read).

    Args:
        storage_dir: the service's storage directory.

    Returns:
        The findings, or None.
    """
    if storage_dir is None:
        return None
    try:
        data = json.loads((Path(storage_dir) / FILENAME).read_text(encoding="utf-8"))
        # a file written before the per-track thresholds has none
        return Readiness(**{key: data[key] for key in Readiness.__dataclass_fields__
                            if key in data or key != "thresholds"})  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError):
        return None


def check_readiness(runner: Any, *, thresholds: Mapping[int, tuple[float, str]]) -> Readiness:
    """Score the base once, note the canaries, record both and refuse a useless threshold.

    Args:
        runner: the worker's ``JobRunner`` (its scorer is prepared).
        thresholds: each thresholded track's ``(threshold, source)`` in force
            (``benchmark.threshold.thresholds_in_force``).

    Returns:
        The findings (also written to ``STORAGE/readiness.json``).

    Raises:
        ThresholdAtOrBelowBase: a track's threshold is at or below the base's test ANLS.
    """
    settings = runner.settings
    base = runner.scorer.score(runner.scorer.reference_dir / "model.safetensors")
    canaries = canaries_present(settings.data_dir)
    track1 = thresholds.get(COMMUNICATION.number, (COMMUNICATION.threshold, "setting"))
    readiness = Readiness(
        base_test_anls=float(base.anls), threshold=float(track1[0]), threshold_source=track1[1],
        canaries=canaries, checked_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        thresholds={str(n): [float(v), source] for n, (v, source) in sorted(thresholds.items())},
    )  # fmt: skip
    write_readiness(settings.storage_dir, readiness)
    for number, (value, source) in sorted(thresholds.items()):
        logger.info("base model test ANLS %.4f; track-%d threshold %.4f (%s)",
                    readiness.base_test_anls, number, value, source)  # fmt: skip
    if canaries:
        logger.info("the benchmark has canaries: every submission is audited")
    else:
        logger.warning("the benchmark has no canaries: the privacy audit cannot run; %s",
                       track2_checks(False))
    problems = threshold_problems(thresholds, readiness.base_test_anls)
    if problems:
        logger.error("refusing to start: %s", "; ".join(problems))
        raise ThresholdAtOrBelowBase("; ".join(problems))
    return readiness
