"""The track-1 ANLS threshold: from the benchmark directory when it states one, else a setting.

For the synthetic benchmark the organisers store 95% of their FedAvg baseline's test ANLS in
``benchmark.json`` under ``track1_threshold``; for the real PFL-DocVQA data it is 0.8242
(95% of 0.8676). ``PFLKIT_LEADERBOARD_THRESHOLD`` overrides the default.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from leaderboard.ranking import REAL_DATA_THRESHOLD

THRESHOLD_ENV = "PFLKIT_LEADERBOARD_THRESHOLD"
THRESHOLD_KEY = "track1_threshold"


def default_threshold() -> float:
    """The configured threshold (``PFLKIT_LEADERBOARD_THRESHOLD``, else the real data's 0.8242).

    Raises:
        ValueError: the variable is not a number in [0, 1].
    """
    raw = os.environ.get(THRESHOLD_ENV)
    if raw is None or raw.strip() == "":
        return REAL_DATA_THRESHOLD
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(
            f"{THRESHOLD_ENV}={raw!r} is not a number; give an ANLS such as 0.8242"
        ) from None
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{THRESHOLD_ENV}={raw!r} must be an ANLS in [0, 1]")
    return value


def track1_threshold(data_dir: Path | None, *, default: float | None = None) -> tuple[float, str]:
    """The threshold and where it came from.

    Args:
        data_dir: the benchmark directory (``benchmark.json`` at its root or in ``evaluator/``).
        default: used when the directory states none (else :func:`default_threshold`).

    Returns:
        ``(threshold, source)``, the source being the file or ``"setting"``.

    Raises:
        ValueError: ``track1_threshold`` in the file is not a number in [0, 1].
    """
    if data_dir is not None:
        for candidate in (
            Path(data_dir) / "benchmark.json",
            Path(data_dir) / "evaluator" / "benchmark.json",
        ):
            if not candidate.is_file():
                continue
            value = json.loads(candidate.read_text()).get(THRESHOLD_KEY)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
                raise ValueError(
                    f"{candidate}: {THRESHOLD_KEY} must be an ANLS in [0, 1], got {value!r}"
                )
            return float(value), str(candidate)
    return (default if default is not None else default_threshold()), "setting"
