"""Upload storage: multipart bodies streamed to disk with per-part limits, stored atomically.

An upload is written under ``STORAGE/incoming/<id>/`` while it arrives (track 3's
personalisations, one form field ``personal_{k}`` per client, into its ``personal/``
sub-directory as ``client_{k}.safetensors``: files, never an archive to unpack); only when every part is
complete and has passed the upload-time checks is the directory flushed and renamed (one
``os.replace``) to ``STORAGE/submissions/<id>/``. A failed or interrupted upload leaves nothing
in ``submissions/`` and its ``incoming/`` directory is removed.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from python_multipart.multipart import MultipartParser, MultipartState, parse_options_header

from benchmark.submission_contract import (
    PARTS,
    PERSONAL_DIR,
    PERSONAL_FIELD,
    personal_file_name,
    stored_name,
)
from benchmark.tracks import common_parts, tracks_needing
from evaluator.validation.errors import InvalidSubmission
from evaluator.validation.metadata import metadata_track, parse_metadata

if TYPE_CHECKING:
    from evaluator.core.config import Settings

FLUSH_BYTES = 1024 * 1024
# After a limit is hit the rest of the body is read and discarded up to this many extra bytes,
# so the client receives the 413 answer instead of a broken connection.
DRAIN_BYTES = 16 * 1024 * 1024
# RFC 2046 section 5.1.1: a boundary is 1 to 70 characters.
MAX_BOUNDARY_CHARS = 70
MAX_PART_HEADER_BYTES = 8 * 1024
# A ``name=`` parameter (not ``filename=``) in a Content-Disposition header.
_NAME_PARAMETER = re.compile(rb"(?:^|;)\s*name\s*=", re.IGNORECASE)


#: what a write to a full disk (or a full quota of the storage's file system) raises
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
STORAGE_FULL = (
    "the evaluator's storage is full: nothing of this upload was kept and your quota is "
    "unchanged; try again later (the organisers see it in their log)"
)


class UploadError(Exception):
    """An upload that cannot be accepted; ``status_code`` is the HTTP answer."""

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message


@dataclass
class SubmissionStore:
    """The directory tree holding uploads.

    Attributes:
        root: the storage directory (shared by every worker machine).
    """

    root: Path

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        for sub in ("incoming", "submissions"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)

    def incoming(self, submission_id: str) -> Path:
        """Where an upload is written while it arrives."""
        return self.root / "incoming" / submission_id

    def directory(self, submission_id: str) -> Path:
        """Where a complete upload lives."""
        return self.root / "submissions" / submission_id

    def file(self, submission_id: str, part: str) -> Path:
        """Path of one part of a stored submission."""
        return self.directory(submission_id) / stored_name(part)

    def commit(self, submission_id: str) -> Path:
        """Flush an upload to disk and move it into place in one rename."""
        source = self.incoming(submission_id)
        for path in sorted(source.rglob("*")):
            if path.is_dir():
                _fsync_directory(path)
                continue
            with path.open("rb") as handle:
                os.fsync(handle.fileno())
        target = self.directory(submission_id)
        os.replace(source, target)
        _fsync_directory(target.parent)
        return target

    def discard(self, submission_id: str) -> None:
        """Remove every trace of an upload (incoming or stored)."""
        shutil.rmtree(self.incoming(submission_id), ignore_errors=True)
        shutil.rmtree(self.directory(submission_id), ignore_errors=True)


def _optional_parts() -> str:
    """Which parts only some tracks need: ``privacy only for track 2``."""
    return ", ".join(
        f"{_field_name(part)} only for track {' or '.join(map(str, tracks_needing(part)))}"
        for part in PARTS
        if part not in common_parts()
    )


def upload_limits(settings: Settings) -> dict[str, int]:
    """The most bytes of each single-file part: the setting its contract entry names.

    Args:
        settings: the service settings.

    Returns:
        Form field -> most bytes, for :func:`receive_multipart`.
    """
    return {
        name: getattr(settings, part.limit_setting)
        for name, part in PARTS.items()
        if not part.per_client
    }


def _field_name(part: str) -> str:
    """The form field(s) of a part: ``{part}_{k}`` (one per client) for a per-client part."""
    return f"{part}_{{k}}" if PARTS[part].per_client else part


def _fsync_directory(path: Path) -> None:
    """Make a rename in ``path`` durable."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


@dataclass(frozen=True)
class ReceivedParts:
    """What an upload delivered.

    Attributes:
        sizes: form field -> bytes received (``personal_{k}`` for client k's personalisation).
        sha256: form field -> hex SHA-256 of the part's content.
        metadata: the metadata part, parsed once by the strict parser while the upload arrived.
    """

    sizes: dict[str, int]
    sha256: dict[str, str]
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PersonalLimits:
    """What track-3 personalisation fields an upload may carry.

    Attributes:
        clients: K; fields ``personal_0`` .. ``personal_{K-1}`` are accepted.
        max_file_bytes: most bytes of one field.
        max_total_bytes: most bytes of all of them together.
        tracks: the tracks whose submissions carry them. The ``metadata`` part names the
            submission's track, so it must come before the first ``personal_{k}`` field: a
            track-1 or -2 upload is then refused at that field's header instead of after
            streaming up to ``max_total_bytes`` of personalisations.
    """

    clients: int
    max_file_bytes: int
    max_total_bytes: int
    tracks: frozenset[int] = field(default_factory=lambda: frozenset(tracks_needing("personal")))


class _PartWriter:
    """python-multipart callbacks that write each allowed part to its own file."""

    def __init__(
        self, directory: Path, limits: dict[str, int], personal: PersonalLimits | None = None
    ) -> None:
        self.directory = directory
        self.limits = dict(limits)
        self.personal = personal
        self.personal_bytes = 0
        self.received: dict[str, int] = {}
        self.hashes: dict[str, Any] = {}
        self._headers: dict[bytes, bytes] = {}
        self._field = b""
        self._value = b""
        self._name: str | None = None
        self._handle: BinaryIO | None = None
        self._metadata_track: int | None = None
        #: the parsed metadata part, once it has arrived.
        self.metadata: dict[str, Any] | None = None

    def callbacks(self) -> dict[str, object]:
        return {
            "on_part_begin": self._part_begin,
            "on_header_field": lambda data, start, end: self._grow("_field", data[start:end]),
            "on_header_value": lambda data, start, end: self._grow("_value", data[start:end]),
            "on_header_end": self._header_end,
            "on_headers_finished": self._headers_finished,
            "on_part_data": self._part_data,
            "on_part_end": self._part_end,
        }

    def _grow(self, attribute: str, data: bytes) -> None:
        value = getattr(self, attribute) + data
        if len(value) > MAX_PART_HEADER_BYTES:
            raise UploadError(400, f"a part header exceeds {MAX_PART_HEADER_BYTES} bytes")
        setattr(self, attribute, value)

    def _part_begin(self) -> None:
        self._headers, self._field, self._value, self._name = {}, b"", b"", None

    def _header_end(self) -> None:
        field = self._field.strip().lower()
        if field in self._headers:
            raise UploadError(
                400,
                f"a part holds the header {field.decode('latin-1')[:40]!r} twice; "
                "send each header once per part",
            )
        self._headers[field] = self._value
        self._field, self._value = b"", b""

    def _headers_finished(self) -> None:
        disposition = self._headers.get(b"content-disposition", b"")
        if len(_NAME_PARAMETER.findall(disposition)) > 1:
            raise UploadError(
                400, "a part's Content-Disposition names its field twice; give one name="
            )
        _, options = parse_options_header(disposition)
        name = options.get(b"name", b"").decode("utf-8", "replace")
        target = self._target(name)
        if name in self.received:
            raise UploadError(422, f"form field {name!r} sent twice")
        self._name = name
        self.received[name] = 0
        self.hashes[name] = hashlib.sha256()
        target.parent.mkdir(exist_ok=True)
        self._handle = target.open("wb")

    def _target(self, name: str) -> Path:
        """The file a form field is written to (``personal_{k}``: ``personal/client_{k}...``).

        Raises:
            UploadError: 422 for an unknown field or a client outside 0..K-1.
        """
        match = PERSONAL_FIELD.match(name)
        if match is not None and self.personal is not None:
            self._require_personal_track(name)
            client = int(match.group(1))
            if client >= self.personal.clients:
                raise UploadError(
                    422,
                    f"{name}: client {client} is out of range; the benchmark has clients "
                    f"0..{self.personal.clients - 1} (one field personal_{{k}} per client)",
                )
            self.limits[name] = self.personal.max_file_bytes
            return self.directory / PERSONAL_DIR / personal_file_name(client)
        if name not in self.limits or name not in PARTS or PARTS[name].per_client:
            fields = [_field_name(part) for part in PARTS]
            raise UploadError(
                422,
                f"unknown form field {name[:40]!r}; send the fields "
                f"{', '.join(fields)} ({_optional_parts()})",
            )
        return self.directory / stored_name(name)

    def _require_personal_track(self, name: str) -> None:
        """Refuse a ``personal_{k}`` field unless the metadata, already received, names a track
        that carries personalisations.

        Raises:
            UploadError: 422 naming what to send instead.
        """
        assert self.personal is not None
        tracks = " or ".join(map(str, sorted(self.personal.tracks)))
        if "metadata" not in self.received:
            raise UploadError(
                422,
                f"{name} came before the metadata part; send metadata (submission.json) first: "
                f"it names the track, and only track {tracks} submissions carry personalisations",
            )
        track = self._metadata_track
        if track not in self.personal.tracks:
            shown = "this" if track is None else f"track {track}"
            raise UploadError(
                422,
                f"{name}: {shown} submissions carry no personalisations; send the fields "
                f"personal_{{k}} with a track-{tracks} submission only",
            )

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        assert self._name is not None and self._handle is not None
        self.received[self._name] += end - start
        if self.received[self._name] > self.limits[self._name]:
            raise UploadError(
                413, f"{self._name} exceeds the limit of {self.limits[self._name]} bytes"
            )
        if self.personal is not None and self._name.startswith("personal_"):
            self.personal_bytes += end - start
            if self.personal_bytes > self.personal.max_total_bytes:
                raise UploadError(
                    413,
                    f"{self._name}: the personalisations exceed the limit of "
                    f"{self.personal.max_total_bytes} bytes in all",
                )
        self._handle.write(data[start:end])
        self.hashes[self._name].update(data[start:end])

    def _part_end(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None
            if self._name == "metadata":
                self._read_metadata()

    def _read_metadata(self) -> None:
        """Parse the metadata part as soon as it ends, with the strict parser the upload-time
        checks use (:func:`evaluator.validation.metadata.parse_metadata`): a duplicate key or a
        track that is not an integer 1..3 is refused here, before any track-dependent part.

        Raises:
            UploadError: 422 with the parser's reason.
        """
        raw = (self.directory / stored_name("metadata")).read_bytes()
        try:
            self.metadata = parse_metadata(raw, max_bytes=self.limits["metadata"])
        except InvalidSubmission as exc:
            raise UploadError(422, str(exc)) from None
        self._metadata_track = metadata_track(self.metadata)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def storage_full(exc: OSError) -> UploadError:
    """The 507 of a write that found the storage full; any other ``OSError`` is raised again
    (it is the server's fault, not the upload's)."""
    if exc.errno not in NO_SPACE:
        raise exc
    return UploadError(507, STORAGE_FULL)


async def receive_multipart(
    body: AsyncIterator[bytes],
    content_type: str,
    directory: Path,
    *,
    limits: dict[str, int],
    max_total: int,
    personal: PersonalLimits | None = None,
) -> ReceivedParts:
    """Stream a ``multipart/form-data`` body into ``directory``, one file per part.

    Args:
        body: the request body chunks.
        content_type: the request's Content-Type header (carries the boundary).
        directory: an empty directory to write into.
        limits: allowed part name -> most bytes.
        max_total: most bytes of the whole body.
        personal: the track-3 personalisation fields accepted (``personal_{k}``), if any.

    Returns:
        The size and SHA-256 of every part.

    Raises:
        UploadError: 415 for a body that is not multipart, 413 for a part or body over its
            limit, 400 for a malformed body (boundary over 70 characters, a header given twice
            in a part, no closing boundary), 422 for unknown, repeated or missing parts, 507
            when the storage is full (the rest of the body is read and discarded first).
    """
    from starlette.concurrency import run_in_threadpool

    kind, options = parse_options_header(content_type)
    boundary = options.get(b"boundary")
    if kind != b"multipart/form-data" or not boundary:
        raise UploadError(415, "send the submission as multipart/form-data")
    if len(boundary) > MAX_BOUNDARY_CHARS:
        raise UploadError(
            400,
            f"the multipart boundary has {len(boundary)} characters; RFC 2046 allows at most "
            f"{MAX_BOUNDARY_CHARS}",
        )
    directory.mkdir(parents=True, exist_ok=False)
    writer = _PartWriter(directory, limits, personal)
    parser = MultipartParser(boundary, writer.callbacks())
    total = 0
    buffer = bytearray()
    error: UploadError | None = None
    try:
        async for chunk in body:
            total += len(chunk)
            if error is not None:
                if total > max_total + DRAIN_BYTES:
                    break
                continue
            if total > max_total:
                error = UploadError(413, f"the upload exceeds the limit of {max_total} bytes")
                continue
            buffer += chunk
            if len(buffer) >= FLUSH_BYTES:
                try:
                    await run_in_threadpool(parser.write, bytes(buffer))
                except UploadError as exc:
                    error = exc
                except OSError as exc:  # a full disk: the rest is drained, then 507
                    error = storage_full(exc)
                buffer.clear()
        if error is None:
            try:
                await run_in_threadpool(parser.write, bytes(buffer))
            except OSError as exc:
                raise storage_full(exc) from None
            parser.finalize()
            if parser.state != MultipartState.END:
                error = UploadError(
                    400,
                    "the body ends before its closing boundary (--BOUNDARY--); "
                    "send the complete multipart body",
                )
    except (UploadError, OSError):  # an OSError is ours (a full disk), not the client's framing
        raise
    except Exception as exc:  # malformed framing from the multipart parser
        raise UploadError(400, f"malformed multipart body ({type(exc).__name__})") from None
    finally:
        writer.close()
    if error is not None:
        raise error
    missing = [part for part in common_parts() if part not in writer.received]
    if missing:
        raise UploadError(422, f"missing form fields: {', '.join(missing)}")
    return ReceivedParts(
        sizes=dict(writer.received),
        sha256={name: digest.hexdigest() for name, digest in writer.hashes.items()},
        metadata=writer.metadata or {},
    )
