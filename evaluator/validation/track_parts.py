"""The parts a submission's track needs (``benchmark.tracks``), checked in its stored directory."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from benchmark.tracks import PART_DESCRIPTIONS, Track
from evaluator.storage import FILENAMES
from evaluator.validation.errors import InvalidSubmission


def check_track_parts(track: Track, directory: Path, *, exclude: Collection[str] = ()) -> None:
    """Require every part the track needs, and no part only other tracks carry.

    Args:
        track: the submission's track.
        directory: the submission's stored files (``evaluator.storage.FILENAMES``).
        exclude: parts checked elsewhere (the worker reads the metadata from the database).

    Raises:
        InvalidSubmission: naming the first missing part, e.g. "track 2 needs a privacy
            declaration (privacy.json)".
    """
    for part in track.parts:
        if part not in exclude and not (directory / FILENAMES[part]).exists():
            raise InvalidSubmission(
                part, f"track {track.number} needs {PART_DESCRIPTIONS[part]} ({FILENAMES[part]})"
            )
    if "personal" not in track.parts and (directory / FILENAMES["personal"]).exists():
        raise InvalidSubmission(
            "personal",
            f"track {track.number} submissions carry no personalisations; send the fields "
            "personal_{k} with a track-3 submission only",
        )
