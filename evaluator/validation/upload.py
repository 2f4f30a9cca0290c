"""The checks of an upload before it is accepted, in the order they run: the metadata, the
track's availability and parts, each part only some submissions carry (:data:`PART_CHECKS`), the
checkpoint's header, then the communication logs.

The worker repeats them and adds the checks that read every weight of the checkpoint (spec,
NaN/inf). A part of a new track that needs an upload-time check is one entry of
:data:`PART_CHECKS`; the route (``evaluator.api.routes.submissions``) only calls
:func:`check_upload`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from benchmark.submission_contract import stored_name
from benchmark.tracks import get_track, track_numbers
from evaluator.benchmark_info import clients_of, track_unavailable
from evaluator.core.config import Settings
from evaluator.submission_metadata import SubmissionMetadata
from evaluator.validation.checkpoint import read_header
from evaluator.validation.commdetails import read_details
from evaluator.validation.commlog import declared_shape, parse_log
from evaluator.validation.errors import InvalidSubmission
from evaluator.validation.metadata import parse_metadata
from evaluator.validation.personal import check_personalisations
from evaluator.validation.privacy import load_declaration
from evaluator.validation.recipe import check_recipe
from evaluator.validation.track_parts import check_track_parts


@dataclass
class Upload:
    """A received upload being checked.

    Attributes:
        directory: the received parts (``benchmark.submission_contract`` stored names).
        settings: limits and the benchmark directory.
        metadata: the validated metadata.
    """

    directory: Path
    settings: Settings
    metadata: SubmissionMetadata

    def path(self, part: str) -> Path:
        """Where the upload holds ``part``."""
        return self.directory / stored_name(part)

    @cached_property
    def clients(self) -> int:
        """The benchmark's K (``benchmark.json``)."""
        return clients_of(self.settings.data_dir)

    @cached_property
    def header(self) -> Any:
        """The checkpoint's header checked (sizes, names, dtypes; never unpickled), read once."""
        return read_header(self.path("model"), max_header_bytes=self.settings.max_header_bytes,
                           max_tensors=self.settings.max_tensors)  # fmt: skip


#: a part's upload check: raises ``InvalidSubmission`` naming the part.
PartCheck = Callable[[Upload], None]


def _check_privacy(upload: Upload) -> None:
    """The privacy declaration read and its fields validated (the accountant's parser)."""
    load_declaration(upload.path("privacy"), max_bytes=upload.settings.max_json_bytes)


def _check_recipe(upload: Upload) -> None:
    """The recipe readable by the re-run and naming the metadata's method."""
    check_recipe(upload.path("recipe"), upload.metadata.method)


def _check_personal(upload: Upload) -> None:
    """Every personalisation against the checkpoint's tensors and the benchmark's K."""
    settings = upload.settings
    check_personalisations(
        upload.path("personal"), upload.header.tensors, upload.clients,
        max_file_bytes=settings.max_personal_file_bytes,
        max_total_bytes=settings.max_personal_bytes,
    )  # fmt: skip


#: part -> its upload check, run in this order when the upload carries the part (which parts a
#: track needs is checked before, ``check_track_parts``).
PART_CHECKS: dict[str, PartCheck] = {
    "privacy": _check_privacy,
    "recipe": _check_recipe,
    "personal": _check_personal,
}


def check_upload(
    directory: Path, settings: Settings, raw: dict[str, Any] | None = None
) -> SubmissionMetadata:
    """The upload-time checks of a received submission.

    Args:
        directory: the received parts.
        settings: limits and the benchmark directory.
        raw: the metadata object as the upload stream parsed it (one parse, one answer:
            ``receive_multipart``); read from ``directory`` with the same parser when omitted.

    Returns:
        The validated metadata.

    Raises:
        InvalidSubmission: naming the faulty part.
    """
    upload = Upload(directory, settings, validated_metadata(directory, settings, raw))
    track = get_track(upload.metadata.track)
    check_track_parts(track, directory)
    for part, check in PART_CHECKS.items():
        if upload.path(part).exists():
            check(upload)
    upload.header  # noqa: B018 - every upload's checkpoint header, personal part or not
    tally = parse_log(
        upload.path("communication_log"), clients=upload.clients,
        max_bytes=settings.max_log_bytes, max_rows=settings.max_log_rows,
        **declared_shape(upload.metadata, track), max_rounds=settings.max_log_rounds,
        max_messages_per_round=2 * upload.clients * settings.max_messages_per_client_round,
    )  # fmt: skip
    read_details(
        upload.path("communication_details"), tally.rows,
        max_bytes=settings.max_details_bytes, max_parameters=2 * settings.max_tensors,
    )  # fmt: skip
    return upload.metadata


def validated_metadata(
    directory: Path, settings: Settings, raw: dict[str, Any] | None = None
) -> SubmissionMetadata:
    """The upload's ``submission.json`` validated, for a track this evaluator can score.

    Raises:
        InvalidSubmission: a field is missing or invalid (the first one is named), or the
            benchmark directory lacks what the track needs.
    """
    if not raw:
        raw = parse_metadata(
            (directory / stored_name("metadata")).read_bytes(), max_bytes=settings.max_json_bytes
        )
    try:
        metadata = SubmissionMetadata.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "metadata"
        raise InvalidSubmission(
            "metadata", f"{where}: {first['msg']} (needs track {track_numbers()} and a method name)"
        ) from None
    if track_unavailable(settings.data_dir, metadata.track) is not None:
        raise InvalidSubmission(
            "metadata", f"track: this evaluator cannot score track {metadata.track}: its "
            "benchmark directory is incomplete (the reason is in the service log); tell the "
            "organisers"
        )  # fmt: skip
    return metadata
