"""Copies found by content: a digest of a checkpoint's tensors, not of its file.

Two safetensors files can hold the same tensors in different bytes: another ``__metadata__``
map, another order of the header's keys or of the tensors in the data region, other
whitespace. The copy policy compared the file's SHA-256, so re-saving another team's checkpoint
with a new header made it a new submission. :func:`tensor_digest` hashes what the model is: for
every tensor, in the order of its name, the name, dtype, shape and raw data bytes (each field
length-prefixed, so no two different tensor lists give the same byte stream). The file's header
is parsed by the benchmark's checked reader (offsets tiling the data region), nothing is
unpickled, and the data is streamed in blocks.

A submission's fingerprint (:func:`submission_fingerprint`) is the checkpoint's tensor digest,
or for track 3 the SHA-256 of it and each personalisation's tensor digest in client order.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from benchmark.model.safetensors_header import SafetensorsError, read_safetensors_header
from benchmark.submission_contract import PERSONAL_DIR, PERSONAL_FILE, personal_field
from evaluator.validation.errors import InvalidSubmission

#: bytes read from the file at a time.
BLOCK_BYTES = 4 * 1024 * 1024


def _field(value: bytes) -> bytes:
    """A length-prefixed field of the digest's byte stream."""
    return len(value).to_bytes(8, "little") + value


def tensor_digest(path: Path, *, max_header_bytes: int, max_tensors: int,
                  part: str = "model") -> str:  # fmt: skip
    """SHA-256 of a safetensors file's tensors in a canonical order, whatever its header says.

    Args:
        path: the file.
        max_header_bytes: largest header accepted.
        max_tensors: most tensors accepted.
        part: the upload part named in errors.

    Returns:
        The hex digest of ``(name, dtype, shape, data)`` of every tensor, sorted by name.

    Raises:
        InvalidSubmission: the file is not a well-formed safetensors file.
    """
    try:
        header = read_safetensors_header(
            path, max_header_bytes=max_header_bytes, max_tensors=max_tensors
        )
    except SafetensorsError as error:
        raise InvalidSubmission(
            part, f"{error.detail}; upload a file written by safetensors"
        ) from None
    digest = hashlib.sha256(b"pflkit tensor digest v1\n")
    with path.open("rb") as handle:
        for name in sorted(header.tensors):
            shape, dtype = header.tensors[name]
            begin, end = header.offsets[name]
            digest.update(_field(name.encode()))
            digest.update(_field(str(dtype).encode()))
            digest.update(_field(",".join(map(str, shape)).encode()))
            digest.update((end - begin).to_bytes(8, "little"))
            handle.seek(header.data_start + begin)
            left = end - begin
            while left > 0:
                block = handle.read(min(BLOCK_BYTES, left))
                if not block:
                    raise InvalidSubmission(part, f"the data of tensor {name!r} is truncated")
                digest.update(block)
                left -= len(block)
    return digest.hexdigest()


def submission_fingerprint(directory: Path, *, model: str, max_header_bytes: int,
                           max_tensors: int) -> str:  # fmt: skip
    """What the copy policy compares: the checkpoint's tensor digest, or for a track-3 upload the
    SHA-256 of it and every personalisation's tensor digest in client order (two teams'
    ``local-only`` runs share the shipped base as global model, not their personalisations).

    Args:
        directory: the received upload.
        model: the checkpoint's file name in it.
        max_header_bytes: largest header accepted.
        max_tensors: most tensors accepted.

    Returns:
        A hex SHA-256.

    Raises:
        InvalidSubmission: a file that is not well-formed safetensors.
    """
    limits = {"max_header_bytes": max_header_bytes, "max_tensors": max_tensors}
    checkpoint = tensor_digest(directory / model, **limits)
    personal_dir = directory / PERSONAL_DIR
    files = []
    if personal_dir.is_dir():
        for path in personal_dir.iterdir():
            match = PERSONAL_FILE.match(path.name)
            if match is not None:
                files.append((int(match.group(1)), path))
    if not files:
        return checkpoint
    lines = [f"model {checkpoint}"] + [
        f"{personal_field(k)} "
        + ("empty" if path.stat().st_size == 0  # the client uses the global model
           else tensor_digest(path, **limits, part=personal_field(k)))
        for k, path in sorted(files)
    ]  # fmt: skip
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()
