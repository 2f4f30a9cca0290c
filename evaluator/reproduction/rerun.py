"""Re-run a recipe in the sandbox and judge the submission by what the re-run produced.

:func:`reproduce` checks what the recipe names against what the organisers hold (the training
data's fingerprint, the base's weights, the kit's version), builds a copy of the kit's
training packages with the participant's component files laid over it, and runs
``pflkit train --recipe`` there in :func:`~evaluator.reproduction.sandbox.run_sandboxed`:
the kit copy, the Python runtime and the training files read-only (the hidden test split, the
evaluator's database and storage are not there at all), one writable scratch directory, no
network, limits on CPU time, memory, disk and processes. The re-run's files are then compared
with the submitted ones (:mod:`~evaluator.reproduction.verdict`).

Each package of the kit copy is mounted where the kit's package lives (under
``benchmark.provenance.KIT_ROOT``, a checkout or site-packages), so that the installed kit's
import paths lead to the copy; the evaluator's own packages (``evaluator``, ``leaderboard``) are
not mounted.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmark.model.loading import resolve_checkpoint
from benchmark.provenance import (
    KIT_PACKAGES,
    KIT_ROOT,
    file_digest,
    kit_source_digest,
    machine_label,
    training_data_fingerprint,
)
from benchmark.recipe import RECIPE_FILE, Recipe, RecipeError, parse_recipe
from evaluator.reproduction.sandbox import (
    Mount,
    SandboxLimits,
    SandboxResult,
    remove_tree,
    run_sandboxed,
)
from evaluator.reproduction.verdict import FAILED, RunFiles, Verdict, compare

#: where the sandbox sees its inputs
RECIPE_INSIDE = "/in/recipe.json"
DATA_INSIDE = "/data"
BASE_INSIDE = "/base"
RUN_INSIDE = "/scratch/run"
#: the sandbox's limits unless the organisers set others
DEFAULT_LIMITS = SandboxLimits()
#: the training command inside the sandbox (``pflkit.cli`` would import the evaluator)
TRAIN = "import sys; from baselines.cli import train; train(prog_name='pflkit train')"


@dataclass(frozen=True)
class Reproduction:
    """A re-run and its verdict.

    Attributes:
        verdict: what the re-run says of the submission.
        seconds: the re-run's wall time (the sandbox's, training and start-up).
        bundle: the participant's files laid over the kit (paths), with ``new`` or ``changed``.
        notes: what differs between the recipe and this machine, and is not itself a verdict.
    """

    verdict: Verdict
    seconds: float = 0.0
    bundle: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (never the recipe itself: its seed is a secret)."""
        return {"verdict": self.verdict.as_dict(), "seconds": round(self.seconds, 2),
                "bundle": self.bundle, "notes": self.notes}  # fmt: skip


def read_recipe(path: Path) -> Recipe:
    """The recipe file of a submission or run directory."""
    if not path.is_file():
        raise RecipeError(f"{path}: no recipe (train with this kit's pflkit train, which writes "
                          "it, and submit it)")  # fmt: skip
    return parse_recipe(path.read_bytes())


def preflight(recipe: Recipe, data_dir: Path, base_dir: Path) -> tuple[Verdict | None, list[str]]:
    """A failed verdict when the organisers cannot run the recipe as named, and notes."""
    if file_digest(base_dir / "model.safetensors") != recipe.base_sha256:
        return Verdict(FAILED, "the recipe starts from another base than the evaluator's "
                       "reference model"), []  # fmt: skip
    if training_data_fingerprint(data_dir) != recipe.data_fingerprint:
        return Verdict(FAILED, "the recipe was trained on other data than the evaluator's copy "
                       "of the training files"), []  # fmt: skip
    notes = []
    if recipe.device != "cpu":
        notes.append(f"trained on {recipe.device}, re-run on the CPU: compared within tolerance")
    elif machine_label() != recipe.machine_label:
        notes.append("another machine type than the recipe's: compared within tolerance")
    return None, notes


def build_kit_copy(files: dict[str, str], root: Path) -> dict[str, str]:
    """The kit's training packages under ``root`` with ``files`` (relative path -> source)
    laid over them; the files that are the participant's own (``new`` or ``changed``)."""
    for package in KIT_PACKAGES:
        shutil.copytree(KIT_ROOT / package, root / package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))  # fmt: skip
    bundle = {}
    for relative, source in files.items():
        target = root / relative
        if target.is_file() and target.read_text(encoding="utf-8") == source:
            continue
        bundle[relative] = "changed" if target.is_file() else "new"
        target.write_text(source, encoding="utf-8")
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return bundle


@dataclass(frozen=True)
class SandboxedTraining:
    """A ``pflkit train`` run in the sandbox: the sandbox's result, the run directory and the
    participant's files it imported."""

    result: SandboxResult
    run: Path
    bundle: dict[str, str]
    seconds: float


def train_in_sandbox(train_args: list[str], *, files: dict[str, str], data_dir: Path,
                     root: Path, limits: SandboxLimits = DEFAULT_LIMITS,
                     inputs: dict[str, Path] | None = None) -> SandboxedTraining:  # fmt: skip
    """``pflkit train TRAIN_ARGS --data /data --out /scratch/run`` on a copy of the kit with
    ``files`` laid over it, in the sandbox; ``inputs`` maps paths inside to host files, each
    copied and mounted read-only."""
    kit_copy, scratch = root / "kit", root / "scratch"
    scratch.mkdir(parents=True)
    bundle = build_kit_copy(files, kit_copy)
    mounts = _mounts(kit_copy, data_dir)
    for index, (inside, source) in enumerate((inputs or {}).items()):
        readable = root / f"input-{index}-{source.name}"  # the sandbox's user reads a copy
        shutil.copyfile(source, readable)
        readable.chmod(0o644)
        mounts.append(Mount(readable, inside))
    argv = [sys.executable, "-c", TRAIN, *train_args, "--data", DATA_INSIDE, "--out", RUN_INSIDE,
            "--no-progress"]  # fmt: skip
    threads = train_args[train_args.index("--threads") + 1] if "--threads" in train_args else "1"
    started = time.monotonic()
    result = run_sandboxed(argv, scratch=scratch, limits=limits, mounts=mounts,
                           env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                                "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
                                "OMP_NUM_THREADS": threads})  # fmt: skip
    return SandboxedTraining(result, scratch / "run", bundle, time.monotonic() - started)


def _mounts(kit_copy: Path, data_dir: Path) -> list[Mount]:
    """The runtime, each package of the kit copy where the kit's package lives (a checkout or
    site-packages), and the training files."""
    runtime = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()}
    mounts = [Mount(path, str(path)) for path in sorted(runtime)]
    mounts += [Mount(kit_copy / package, str(KIT_ROOT / package)) for package in KIT_PACKAGES]
    mounts.append(Mount(data_dir / "participant", f"{DATA_INSIDE}/participant"))
    return mounts


def reproduce(submitted: RunFiles, recipe_file: Path, data_dir: Path, *,
              limits: SandboxLimits = DEFAULT_LIMITS, threads: int | None = None,
              work: Path | None = None, tolerance: float | None = None,
              base_dir: Path | None = None) -> Reproduction:  # fmt: skip
    """Re-run a submission's recipe on ``data_dir``'s training files and judge it.

    Args:
        submitted: the submission's files.
        recipe_file: its ``recipe.json``.
        data_dir: the organisers' benchmark directory (its ``participant/`` files are used).
        limits: the sandbox's limits.
        threads: torch threads of the re-run (``None``: the recipe's).
        work: where the kit copy and the re-run go (``None``: a temporary folder, removed).
        tolerance: see :func:`~evaluator.reproduction.verdict.compare`.
        base_dir: the evaluator's reference model, the base the recipe must start from
            (``None``: the shipped base).
    """
    try:
        recipe = read_recipe(recipe_file)
    except RecipeError as error:
        return Reproduction(Verdict(FAILED, str(error)))
    base_dir = resolve_checkpoint("base" if base_dir is None else base_dir)
    failed, notes = preflight(recipe, data_dir, base_dir)
    if failed is not None:
        return Reproduction(failed)
    root = Path(tempfile.mkdtemp(prefix="reproduce-")) if work is None else work
    threads = threads or recipe.threads
    try:
        inputs = {RECIPE_INSIDE: recipe_file}
        inputs.update({f"{BASE_INSIDE}/{path.name}": path for path in base_dir.iterdir()
                       if path.is_file()})  # fmt: skip
        training = train_in_sandbox(
            ["--recipe", RECIPE_INSIDE, "--base", BASE_INSIDE, "--device", "cpu", "--threads",
             str(threads)], files=recipe.files, data_dir=data_dir, root=root, limits=limits,
            inputs=inputs)  # fmt: skip
        if kit_source_digest(root / "kit") != recipe.kit_source_sha256:
            notes.append("the kit with the recipe's files is not the kit the run was trained "
                         "with: the participant changed other kit files")  # fmt: skip
        result = training.result
        if result.stopped is not None or result.returncode != 0:
            why = result.stopped or f"it exited with status {result.returncode}"
            last = (result.stderr.strip().splitlines() or [""])[-1]
            return Reproduction(Verdict(FAILED, f"the recipe did not run: {why}",
                                        {"error": last[-500:]}), training.seconds,
                                training.bundle, notes)  # fmt: skip
        same = (machine_label() == recipe.machine_label and threads == recipe.threads
                and recipe.device == "cpu")  # the re-run trains on the CPU
        options = {} if tolerance is None else {"tolerance": tolerance}
        verdict = compare(submitted, RunFiles.of_run_directory(training.run),
                          base_model=base_dir / "model.safetensors",
                          same_machine=same, **options)  # fmt: skip
        return Reproduction(verdict, training.seconds, training.bundle, notes)
    finally:
        if work is None:
            remove_tree(root)  # the sandboxed code may have nested folders past rmtree's reach


def reproduce_run_directory(run: Path, data_dir: Path, **options: Any) -> Reproduction:
    """:func:`reproduce` of a run directory (its ``recipe.json`` beside its files)."""
    return reproduce(RunFiles.of_run_directory(run), run / RECIPE_FILE, data_dir, **options)
