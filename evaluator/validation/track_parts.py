"""The parts a submission's track needs (``benchmark.tracks``), checked in its stored directory."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from benchmark.submission_contract import PARTS
from benchmark.tracks import Track, tracks_needing
from evaluator.validation.errors import InvalidSubmission


def check_track_parts(track: Track, directory: Path, *, exclude: Collection[str] = ()) -> None:
    """Require every part the track needs, and no part only other tracks carry.

    Args:
        track: the submission's track.
        directory: the submission's stored files (``benchmark.submission_contract``).
        exclude: parts checked elsewhere (the worker reads the metadata from the database).

    Raises:
        InvalidSubmission: naming the first missing part, e.g. "track 2 needs a privacy
            declaration (privacy.json)".
    """
    for name in track.parts:
        part = PARTS[name]
        if name not in exclude and not (directory / part.stored_name).exists():
            raise InvalidSubmission(
                name, f"track {track.number} needs {part.description} ({part.stored_name})"
            )
    for part in PARTS.values():
        if part.per_client and part.name not in track.parts:
            _refuse_per_client(track, directory, part.name)


def _refuse_per_client(track: Track, directory: Path, name: str) -> None:
    """Refuse a per-client part (``personal_{k}``) that the track does not carry.

    Raises:
        InvalidSubmission: naming the tracks that carry it.
    """
    if (directory / PARTS[name].stored_name).exists():
        carriers = " or ".join(map(str, tracks_needing(name)))
        raise InvalidSubmission(
            name,
            f"track {track.number} submissions carry no personalisations; send the fields "
            f"{name}_{{k}} with a track-{carriers} submission only",
        )
