"""Where a run came from: the kit's source, the machine, the training data.

A run's recipe (``baselines.recipe``) records these, and the evaluator computes them again
before it re-runs the recipe (``evaluator.reproduction``): a re-run is only comparable bit for
bit when the kit's training code, the machine type and the training data are the same.
"""

from __future__ import annotations

import hashlib
import platform
from importlib import metadata
from pathlib import Path

import benchmark

#: the packages whose source decides what training computes
KIT_PACKAGES = ("accountant", "baselines", "benchmark", "pflkit")
#: where the kit's packages sit (the folder holding ``benchmark/``)
KIT_ROOT = Path(benchmark.__file__).resolve().parent.parent
#: the files of a benchmark directory that training reads
TRAINING_FILES = ("participant/*.npy", "participant/*.json", "participant/images/*")


def kit_version() -> str:
    """The installed kit's version; ``0+unknown`` where it runs from a source tree that was
    not installed (a lent GPU machine runs the kit from ``PYTHONPATH``)."""
    try:
        return metadata.version("pfl-docvqa-kit")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def kit_source_digest(root: Path = KIT_ROOT) -> str:
    """SHA-256 over the kit's Python sources (path and bytes of every ``.py`` file, sorted)."""
    digest = hashlib.sha256()
    for package in KIT_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode() + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def training_data_fingerprint(data_dir: str | Path) -> str:
    """SHA-256 over the training files of a benchmark directory (imdb files, provider lists,
    page images): two directories with the same fingerprint train the same run."""
    root = Path(data_dir)
    digest = hashlib.sha256()
    for pattern in TRAINING_FILES:
        for path in sorted(root.glob(pattern)):
            if path.is_file():
                digest.update(str(path.relative_to(root)).encode() + b"\0")
                digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def file_digest(path: str | Path) -> str:
    """SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def machine_label() -> str:
    """The machine type as the CPU pins name it: CPU model, torch's vector capability, torch.

    Two machines with one label round a CPU run the same way; a run is reproduced bit for bit
    only on its own label.
    """
    import torch

    model = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"{model}, {torch.backends.cpu.get_cpu_capability()}, torch {torch.__version__}"
