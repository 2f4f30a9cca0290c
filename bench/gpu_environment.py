"""What the GPU check carries to a lent GPU machine: wheels and the official code, under ``.gpu/``.

The lent machine (see the developers' guide) has Python 3.12, a CUDA build of torch and many of
the kit's dependencies, and no network. ``make gpu-wheels`` fills ``.gpu/`` here:

- ``.gpu/wheels/``: the kit's dependencies that machine lacks (:data:`KIT_WHEELS`), at the versions
  of ``constraints.txt``; bitsandbytes is cut down to its CPU and CUDA 13 libraries (the full
  wheel is 43 MB, past what a call carries);
- ``.gpu/official-wheels/``: the official environment (:data:`OFFICIAL_WHEELS`): transformers
  4.27.2 as the official ``environment.yml`` pins it, a huggingface_hub it runs with, tokenizers
  0.15.2 (4.27 imports its modules; the 0.13 it asks for has no Python 3.12 wheel, see
  :mod:`bench.official_side`) and editdistance for the official metrics;
- ``.gpu/official-code/``: the official starter kit's files, exported from a local clone
  (``OFFICIAL_REPO``, a checkout or a bare git directory of rubenpt91/PFL-DocVQA-Competition);
  it is never part of the kit and ``.gpu/`` is ignored by git.

Usage: ``python -m bench.gpu_environment --official-repo PATH [--out .gpu]``; it prints the
sizes, which must stay under the 64 MiB a call carries together with the working tree.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

#: the kit's dependencies the GPU image lacks (or holds at another version), by distribution
KIT_WHEELS = ("bitsandbytes", "datasets", "dill", "multiprocess", "opacus", "rapidfuzz",
              "dp-accounting", "dm-tree", "transformers", "peft", "regex")  # fmt: skip
#: the official environment: exact versions
OFFICIAL_WHEELS = ("transformers==4.27.2", "huggingface-hub==0.16.4", "tokenizers==0.15.2",
                   "editdistance==0.8.1")  # fmt: skip
#: the GPU machine's interpreter and platform tags, for pip download
PLATFORM = ["--python-version", "3.12", "--implementation", "cp", "--only-binary=:all:",
            *[arg for tag in ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64",
                              "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
                              "manylinux2014_x86_64", "manylinux1_x86_64")
              for arg in ("--platform", tag)]]  # fmt: skip
#: bitsandbytes libraries kept: the CPU one and CUDA 13 (the GPU image's torch is cu130)
BITSANDBYTES_KEPT = re.compile(r"libbitsandbytes_(cpu|cuda13\d)\.so$")


def pinned(name: str, constraints: Path) -> str:
    """``name==version`` from ``constraints.txt``."""
    pattern = re.compile(rf"^{re.escape(name)}==(\S+)$", re.IGNORECASE)
    for line in constraints.read_text().splitlines():
        match = pattern.match(line.replace("_", "-").strip())
        if match:
            return f"{name}=={match.group(1)}"
    raise SystemExit(f"{name} is not pinned in {constraints}")


def download(requirements: list[str], into: Path) -> None:
    """pip download of exact requirements for the GPU machine's platform, no dependencies."""
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", *PLATFORM,
                    "-d", str(into), *requirements], check=True)  # fmt: skip


def slim_bitsandbytes(wheels: Path) -> None:
    """Rewrite the bitsandbytes wheel without the libraries of other CUDA and ROCm versions."""
    for wheel in wheels.glob("bitsandbytes-*.whl"):
        slim = wheel.with_suffix(".slim")
        with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(
            slim, "w", compression=zipfile.ZIP_DEFLATED
        ) as target:
            dropped = {name for name in source.namelist()
                       if name.endswith(".so") and not BITSANDBYTES_KEPT.search(name)}  # fmt: skip
            for item in source.infolist():
                if item.filename in dropped:
                    continue
                data = source.read(item.filename)
                if item.filename.endswith(".dist-info/RECORD"):
                    data = "".join(line for line in data.decode().splitlines(keepends=True)
                                   if line.split(",", 1)[0] not in dropped).encode()  # fmt: skip
                target.writestr(item, data)
        slim.replace(wheel)


def export_official_code(repo: Path, into: Path) -> None:
    """The official code's files at its HEAD, from a checkout or a bare git directory."""
    if into.exists():
        shutil.rmtree(into)
    into.mkdir(parents=True)
    with tempfile.TemporaryFile() as archive:
        subprocess.run(["git", "--git-dir" if (repo / "HEAD").is_file() else "-C", str(repo),
                        "archive", "HEAD"], stdout=archive, check=True)  # fmt: skip
        archive.seek(0)
        subprocess.run(["tar", "-x", "-C", str(into), "--exclude=*.pdf"], stdin=archive,
                       check=True)  # fmt: skip


def size_mib(path: Path) -> float:
    """Bytes under a folder, in MiB."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def main(argv: list[str] | None = None) -> None:
    """Fill ``--out`` and print what it holds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(".gpu"))
    parser.add_argument("--official-repo", type=Path, help="a clone of the official starter kit")
    parser.add_argument("--constraints", type=Path, default=Path("constraints.txt"))
    args = parser.parse_args(argv)
    for folder in ("wheels", "official-wheels"):
        shutil.rmtree(args.out / folder, ignore_errors=True)
    download([pinned(name, args.constraints) for name in KIT_WHEELS], args.out / "wheels")
    slim_bitsandbytes(args.out / "wheels")
    download(list(OFFICIAL_WHEELS), args.out / "official-wheels")
    if args.official_repo is not None:
        export_official_code(args.official_repo, args.out / "official-code")
    elif not (args.out / "official-code").is_dir():
        print("no --official-repo: the official side of the comparisons will be skipped")
    for folder in sorted(p for p in args.out.iterdir() if p.is_dir()):
        print(f"{folder}: {size_mib(folder):.1f} MiB")


if __name__ == "__main__":
    main()
