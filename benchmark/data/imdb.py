"""Reading and writing the PFL-DocVQA files: imdb `.npy` arrays and `data_points.json`.

An imdb file is a numpy object array: element 0 is a header dict, elements 1.. are records
(dicts, see docs/design.md). Loading it needs `allow_pickle=True`, which executes code stored in
the file: only ever load the organisers' own files (the released PFL-DocVQA data or the kit's
own generator output) with these functions, never a file a participant uploads.

Writes are atomic: a temporary file in the same directory is renamed over the target, so a
crash never leaves a half-written file behind.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmark.data.errors import DataError, DataFileNotFoundError

REQUIRED_FIELDS = ("question", "ocr_tokens", "ocr_normalized_boxes", "image_name")
BOX_TOLERANCE = 1e-6


def read_imdb(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Load an imdb file (organisers' files only: this unpickles).

    Args:
        path: the `.npy` file.

    Returns:
        The header dict and the records (record `i` of the list is array element `i + 1`).

    Raises:
        DataFileNotFoundError: when the file does not exist.
        DataError: when it is not an object array with a header dict and record dicts.
    """
    path = Path(path)
    if not path.is_file():
        raise DataFileNotFoundError(
            f"{path} does not exist: point the kit at a directory with the PFL-DocVQA imdb files "
            "(or run `pflkit data generate --out DIR`)."
        )
    try:
        array = np.load(path, allow_pickle=True)  # organisers' files only (see module docstring)
    except (ValueError, OSError, EOFError) as error:
        raise DataError(
            f"{path} is not a readable numpy .npy file ({error}); re-download or regenerate it."
        ) from error
    if (
        array.dtype != object
        or array.ndim != 1
        or len(array) == 0
        or not isinstance(array[0], dict)
    ):
        raise DataError(
            f"{path} is not an imdb file: expected a 1-D object array whose element 0 is a header dict."
        )
    records = list(array[1:])
    for index, record in enumerate(records, start=1):
        if not isinstance(record, dict):
            raise DataError(
                f"{path}: element {index} is a {type(record).__name__}, expected a record dict."
            )
    return dict(array[0]), records


def validate_record(
    record: dict[str, Any], where: str, *, require_answers: bool = True
) -> np.ndarray:
    """Check a record's required fields and boxes.

    Args:
        record: the record dict.
        where: "file, record i" prefix for error messages.
        require_answers: whether `answers` must be present (False for a test file without answers).

    Returns:
        The boxes as a float64 array of shape (N, 4).

    Raises:
        DataError: for a missing field, tokens/boxes of different lengths, a wrong box shape or
            coordinates outside [0, 1].
    """
    required = REQUIRED_FIELDS + (("answers",) if require_answers else ())
    missing = [name for name in required if name not in record]
    if missing:
        raise DataError(
            f"{where} has no field {', '.join(repr(m) for m in missing)}; every record needs "
            f"{', '.join(required)}. Regenerate the file or fix the record."
        )
    answers = record.get("answers")
    if require_answers and not isinstance(answers, str | list | tuple | np.ndarray):
        raise DataError(
            f"{where}: 'answers' is a {type(answers).__name__}; expected a string or a list of strings."
        )
    tokens = record["ocr_tokens"]
    try:
        boxes = np.asarray(record["ocr_normalized_boxes"], dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise DataError(f"{where}: 'ocr_normalized_boxes' is not numeric ({error}).") from error
    if boxes.size == 0 and len(tokens) == 0:
        return np.zeros((0, 4), dtype=np.float64)
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        raise DataError(
            f"{where}: 'ocr_normalized_boxes' has shape {boxes.shape}; expected (N, 4) rows of x0, y0, x1, y1."
        )
    if boxes.shape[0] != len(tokens):
        raise DataError(
            f"{where}: {len(tokens)} OCR tokens but {boxes.shape[0]} boxes; every token needs exactly one box."
        )
    if (
        not np.isfinite(boxes).all()
        or boxes.min() < -BOX_TOLERANCE
        or boxes.max() > 1 + BOX_TOLERANCE
    ):
        bad = int(
            np.argwhere(
                ~np.isfinite(boxes) | (boxes < -BOX_TOLERANCE) | (boxes > 1 + BOX_TOLERANCE)
            )[0][0]
        )
        raise DataError(
            f"{where}: box {bad} of token {tokens[bad]!r} is {boxes[bad].tolist()}, outside [0, 1]; boxes must "
            "be normalised by the page width and height (divide pixel coordinates by the image size)."
        )
    return boxes


def write_imdb(path: str | Path, header: dict[str, Any], records: Sequence[dict[str, Any]]) -> None:
    """Write an imdb file atomically after validating every record.

    Args:
        path: target `.npy` file (its directory is created).
        header: header dict stored at element 0 (keep it free of time stamps for reproducibility).
        records: record dicts; `answers` may be a string or a list of strings.

    Raises:
        DataError: when a record is invalid (nothing is written then).
    """
    path = Path(path)
    has_answers = header.get("has_answer", True)
    for index, record in enumerate(records, start=1):
        validate_record(record, f"{path.name}, record {index}", require_answers=has_answers)
    array = np.empty(len(records) + 1, dtype=object)
    array[0] = dict(header)
    for index, record in enumerate(records, start=1):
        array[index] = record
    with _atomic(path, "wb") as handle:
        np.save(handle, array, allow_pickle=True)


def read_data_points(path: str | Path) -> dict[str, dict[str, list[int]]]:
    """Load `data_points.json`: {"client_<k>": {provider: [record indexes, header = 0]}}.

    Raises:
        DataFileNotFoundError: when the file does not exist.
        DataError: when it is not that mapping.
    """
    path = Path(path)
    if not path.is_file():
        raise DataFileNotFoundError(
            f"{path} does not exist: the provider of each training record comes from data_points.json "
            "next to the imdb_train_client_*.npy files; copy it from the PFL-DocVQA release."
        )
    try:
        content = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise DataError(f"{path} is not valid JSON ({error}).") from error
    ok = isinstance(content, dict) and all(
        isinstance(providers, dict)
        and all(
            isinstance(ix, list) and all(isinstance(i, int) for i in ix)
            for ix in providers.values()
        )
        for providers in content.values()
    )
    if not ok:
        raise DataError(f"{path} must map 'client_<k>' to {{provider: [record indexes]}}.")
    return content


def write_data_points(path: str | Path, data_points: dict[str, dict[str, list[int]]]) -> None:
    """Write `data_points.json` atomically (sorted keys, so the same content gives the same bytes)."""
    with _atomic(Path(path), "w") as handle:
        json.dump(data_points, handle, indent=1, sort_keys=True)
        handle.write("\n")


def write_bytes(path: str | Path, content: bytes) -> None:
    """Write a file (e.g. a page image) atomically."""
    with _atomic(Path(path), "wb") as handle:
        handle.write(content)


class _atomic:
    """Context manager: write to a temporary file next to `path`, rename it over `path` on success."""

    def __init__(self, path: Path, mode: str) -> None:
        self.path, self.mode = path, mode

    def __enter__(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, self.tmp = tempfile.mkstemp(
            prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent
        )
        self.handle = os.fdopen(fd, self.mode)
        return self.handle

    def __exit__(self, exc_type, exc, tb) -> None:
        self.handle.close()
        if exc_type is None:
            os.chmod(self.tmp, 0o644)
            os.replace(self.tmp, self.path)
        else:
            os.unlink(self.tmp)
