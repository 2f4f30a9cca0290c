"""The track-1 ANLS threshold: from the benchmark directory when it states one, else a setting.

For the synthetic benchmark the organisers store 95% of their FedAvg baseline's test ANLS in
``benchmark.json`` under the track's ``threshold_key``; ``benchmark.threshold.stated_threshold``
is the one lookup. For the real PFL-DocVQA data it is the track's ``threshold`` (0.8242, 95% of
0.8676); ``PFLKIT_LEADERBOARD_THRESHOLD`` overrides that default.
"""

from __future__ import annotations

import os
from pathlib import Path

from benchmark.threshold import stated_threshold
from benchmark.tracks import COMMUNICATION

THRESHOLD_ENV = "PFLKIT_LEADERBOARD_THRESHOLD"
THRESHOLD_KEY = COMMUNICATION.threshold_key


def default_threshold() -> float:
    """The configured threshold (``PFLKIT_LEADERBOARD_THRESHOLD``, else the real data's).

    Raises:
        ValueError: the variable is not a number in [0, 1].
    """
    raw = os.environ.get(THRESHOLD_ENV)
    if raw is None or raw.strip() == "":
        return COMMUNICATION.threshold
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(
            f"{THRESHOLD_ENV}={raw!r} is not a number; give an ANLS such as "
            f"{COMMUNICATION.threshold}"
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
        ValueError: the threshold in the file is not a number in [0, 1].
    """
    stated = stated_threshold(data_dir, COMMUNICATION) if data_dir is not None else None
    if stated is not None:
        return stated[0], str(stated[1])
    return (default if default is not None else default_threshold()), "setting"
