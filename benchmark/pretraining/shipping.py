"""Installing a pre-trained checkpoint as the shipped `base` model, with checksums.

The base model lives in the repository (`benchmark/assets/base/`) so that every participant and
the evaluator start from the same weights. `SHA256SUMS` lists the digest of every file;
`verify_base` recomputes them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

CHECKSUM_FILE = "SHA256SUMS"


def sha256_of(path: Path) -> str:
    """Hex SHA-256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_checksums(directory: Path) -> Path:
    """Write `SHA256SUMS` (sha256sum format) for every file of a directory."""
    lines = [
        f"{sha256_of(path)}  {path.name}\n"
        for path in sorted(directory.iterdir())
        if path.is_file() and path.name != CHECKSUM_FILE
    ]
    target = directory / CHECKSUM_FILE
    target.write_text("".join(lines), encoding="utf-8")
    return target


def verify_checksums(directory: Path) -> list[str]:
    """Files of a shipped directory whose digest differs from `SHA256SUMS` (or are missing).

    Raises:
        FileNotFoundError: if the directory has no `SHA256SUMS`.
    """
    listing = directory / CHECKSUM_FILE
    if not listing.is_file():
        raise FileNotFoundError(f"{listing}: missing; run `pflkit pretrain --ship` to write it")
    mismatched = []
    for line in listing.read_text(encoding="utf-8").splitlines():
        expected, name = line.split("  ", 1)
        path = directory / name
        if not path.is_file() or sha256_of(path) != expected:
            mismatched.append(name)
    return mismatched


def ship(checkpoint: Path, target: Path) -> Path:
    """Copy a checkpoint directory to `target` (atomically) and write its checksums.

    Args:
        checkpoint: a checkpoint written by the pre-training loop.
        target: where the shipped model lives (`benchmark/assets/base`).

    Returns:
        The target directory.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    for path in sorted(checkpoint.iterdir()):
        if path.is_file() and not path.name.startswith("trainer_state"):
            shutil.copyfile(path, staging / path.name)
    write_checksums(staging)
    old = target.with_name(f".{target.name}.old-{os.getpid()}")
    if target.exists():
        os.replace(target, old)
    os.replace(staging, target)
    shutil.rmtree(old, ignore_errors=True)
    return target
