"""Scoring of a validated checkpoint on the hidden test split (the only code that touches it).

Everything that depends on the benchmark package sits here: the expected tensor spec of the
benchmark's VT5, building the model from the organisers' reference configuration (never from
anything the participant sent), and the evaluation loop shared with ``pflkit evaluate``. Only
aggregate scores leave this module: no prediction, answer or question is returned, logged or
put into an error message.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import socket
import tempfile
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from benchmark.model.safetensors_header import TensorSpec
from evaluator.benchmark_info import clients_of
from evaluator.validation.binding import Reference

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TestScores:
    """Aggregate scores on the hidden test split.

    Attributes:
        anls: ANLS over every question (Biten et al. 2019).
        accuracy: exact-match accuracy.
        anls_in: ANLS on questions of providers seen in training.
        anls_out: ANLS on questions of unseen providers.
        accuracy_in: accuracy, in-distribution.
        accuracy_out: accuracy, out-of-distribution.
        n: questions scored.
        n_in: in-distribution questions.
        n_out: out-of-distribution questions.
        seconds: wall time of the evaluation.
        personal: track 3: the personalised figures
            (:class:`benchmark.evaluation.personal.PersonalisedResult`), else None.
    """

    anls: float
    accuracy: float
    anls_in: float | None
    anls_out: float | None
    accuracy_in: float | None
    accuracy_out: float | None
    n: int
    n_in: int
    n_out: int
    seconds: float
    personal: Any = None


class Scorer:
    """Scores checkpoints on one benchmark's hidden test split; cached per worker process.

    Args:
        data_dir: the benchmark directory (its ``evaluator/`` part holds the test split).
        reference_model: ``base`` or a model directory whose configuration defines what a
            submission must contain.
        batch_size: evaluation batch size.
        images_dir: explicit images directory of the test split, if not next to the ``.npy``.
        cache_root: organiser-private directory for the tokenised test split (default: a
            temporary directory).
        device: where the model runs (``auto``, ``cpu``, ``cuda``, ``cuda:N``).
        precision: ``fp32`` or ``bf16``.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        reference_model: str = "base",
        batch_size: int = 32,
        images_dir: Path | None = None,
        cache_root: Path | None = None,
        device: str = "auto",
        precision: str = "fp32",
    ) -> None:
        self.data_dir = Path(data_dir)
        self.device_name = device
        self.precision = precision
        self.reference_model = reference_model
        self.batch_size = batch_size
        self.images_dir = images_dir
        self.cache_dir = private_cache_dir(cache_root)
        #: the other families' references (``Settings.family_references``) and their scorers
        self.family_references: dict[str, str] = {}
        self._siblings: dict[str, Scorer] = {}

    @classmethod
    def from_settings(cls, settings: Any, *, cache_root: Path | None = None) -> Scorer:
        """The scorer a worker with these settings uses.

        Args:
            settings: the service settings (data, reference model, batch size, device...).
            cache_root: where the tokenised test split is cached (default: the storage
                directory).

        Returns:
            The scorer.
        """
        scorer = cls(
            settings.data_dir,
            reference_model=settings.reference_model,
            batch_size=settings.batch_size,
            images_dir=settings.images_dir,
            cache_root=cache_root or settings.storage_dir,
            device=settings.device,
            precision=settings.precision,
        )
        scorer.family_references = dict(settings.family_references)
        return scorer

    @cached_property
    def family(self) -> str:
        """The model family of the reference (its config's ``model_type``)."""
        from benchmark.model import read_checkpoint_config

        return str(read_checkpoint_config(self.reference_dir).model_type)

    def for_family(self, family: str) -> Scorer:
        """The scorer of a submission of ``family``: this one for the reference's family, else
        one with the organisers' reference of that family, sharing this one's test split.

        Raises:
            InvalidSubmission: the competition scores no checkpoint of that family.
        """
        from evaluator.validation import InvalidSubmission

        if family == self.family:
            return self
        if family not in self.family_references:
            scored = ", ".join([self.family, *sorted(self.family_references)])
            raise InvalidSubmission(
                "metadata",
                f"submission.json declares model family {family!r}; this competition scores "
                f"{scored} checkpoints (the organisers hold a reference of each)",
            )
        if family not in self._siblings:
            sibling = Scorer(
                self.data_dir, reference_model=self.family_references[family],
                batch_size=self.batch_size, images_dir=self.images_dir,
                device=self.device_name, precision=self.precision,
            )  # fmt: skip
            sibling.cache_dir = self.cache_dir
            sibling.__dict__["_test_split"] = self._test_split
            self._siblings[family] = sibling
        return self._siblings[family]

    @cached_property
    def clients(self) -> int:
        """K, the number of federated clients of the benchmark (``benchmark.json``)."""
        return clients_of(self.data_dir)

    @cached_property
    def expected_spec(self) -> TensorSpec:
        """Names, shapes and dtypes a submitted checkpoint must have (the reference's config)."""
        from benchmark.model import expected_tensor_spec, read_checkpoint_config

        spec = expected_tensor_spec(read_checkpoint_config(self.reference_dir))
        return {name: (tuple(shape), _dtype_name(dtype)) for name, (shape, dtype) in spec.items()}

    @cached_property
    def reference(self) -> Reference:
        """The reference checkpoint as the binding checks need it: the base every run starts
        from, its tensors, and the file names of the model's parameter names."""
        from benchmark.model import file_names, load_model

        model = load_model(self.reference_dir, check_values=False)
        names = file_names(model)
        del model
        return Reference(self.reference_dir / "model.safetensors", self.expected_spec, names)

    @cached_property
    def reference_dir(self) -> Path:
        """Directory of the reference model (``base`` is the shipped one)."""
        from benchmark.model import resolve_checkpoint

        return Path(resolve_checkpoint(self.reference_model))

    @cached_property
    def _test_split(self) -> Any:
        """The hidden test split, loaded once per process."""
        from benchmark.data import load_split

        return load_split(self.data_dir, split="test", images_dir=self.images_dir)

    @cached_property
    def _processor(self) -> Any:
        """The reference processor, loaded once per process."""
        from benchmark.model import load_processor

        return load_processor(self.reference_dir)

    @cached_property
    def device(self) -> Any:
        """The torch device the model runs on.

        Raises:
            ValueError: the device is not one of this machine (e.g. ``cuda`` without a GPU).
        """
        from benchmark.model.device import resolve_device

        return resolve_device(self.device_name)

    @cached_property
    def _personal_splits(self) -> Any:
        """Each client's personal test questions and the unseen providers' (track 3)."""
        from benchmark.data import personal_splits

        return personal_splits(self.data_dir, "test")

    def prepare(self) -> None:
        """Resolve the device and load the test split, the processor, the spec and the
        reference checkpoint's names ahead of the first job."""
        _ = self.device, self._test_split, self._processor, self.expected_spec, self.reference

    def build_model(self, checkpoint: Path) -> Any:
        """The reference's architecture (of its family) with the submission's (already
        validated) weights.

        The model is loaded with ``from_pretrained`` from a scratch directory holding the
        organisers' reference configuration and tokenizer next to the submitted weights, so
        nothing but tensors comes from the participant.

        Args:
            checkpoint: a safetensors file that passed :func:`validate_checkpoint`.

        Returns:
            The model in eval mode.
        """
        from benchmark.model import load_model

        with tempfile.TemporaryDirectory(prefix="pflkit-score-") as scratch:
            for item in self.reference_dir.iterdir():
                if item.is_file() and item.name != "model.safetensors":
                    os.symlink(item.resolve(), Path(scratch) / item.name)
            os.symlink(Path(checkpoint).resolve(), Path(scratch) / "model.safetensors")
            return load_model(scratch, check_values=False).eval()

    def score(self, checkpoint: Path, personal: Any = None) -> TestScores:
        """ANLS and accuracy of a checkpoint on the hidden test split, overall and in/out, and
        (track 3) the personalised figures of its per-client personalisations.

        One model is in memory: the global pass scores every question once; then each client's
        personalisation is applied to it in place, its personal questions answered, and the
        global weights restored (``benchmark.evaluation.evaluate_personalised``).

        Args:
            checkpoint: a validated safetensors file.
            personal: its checked personalisations
                (:class:`benchmark.model.personalisation.Personalisations`), or None.

        Returns:
            The aggregate scores.
        """
        from benchmark.evaluation import evaluate, evaluate_personalised

        model = self.build_model(checkpoint).to(self.device)
        started = time.perf_counter()
        options = {"batch_size": self.batch_size, "progress": False,
                   "cache_dir": self.cache_dir, "precision": self.precision}  # fmt: skip
        result = evaluate(model, self._processor, self._test_split, **options)
        personalised = None
        if personal is not None:
            personalised = evaluate_personalised(
                model, self._processor, self._test_split, self._personal_splits,
                personal.load,
                global_scores={p.question_id: p.anls for p in result.predictions}, **options,
            )  # fmt: skip
        seconds = time.perf_counter() - started
        inside = _breakdown(result, "in")
        outside = _breakdown(result, "out")
        return TestScores(
            anls=float(result.anls),
            accuracy=float(result.accuracy),
            n=int(result.n),
            anls_in=inside[0],
            accuracy_in=inside[1],
            n_in=inside[2],
            anls_out=outside[0],
            accuracy_out=outside[1],
            n_out=outside[2],
            seconds=seconds,
            personal=personalised,
        )


def private_cache_dir(root: Path | None) -> Path:
    """This process's cache of the tokenised test split, removed at exit.

    Caches left by killed workers of this host (their process is gone) are removed first, so
    tokenised test data does not accumulate.

    Args:
        root: organiser-private directory (the storage directory); None for the system's
            temporary directory.

    Returns:
        The directory.
    """
    base = Path(root or tempfile.gettempdir()) / "pflkit-scoring-cache"
    base.mkdir(parents=True, exist_ok=True, mode=0o700)
    host = socket.gethostname()
    for stale in base.glob(f"{host}-*"):
        pid = stale.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)
    mine = base / f"{host}-{os.getpid()}"
    mine.mkdir(exist_ok=True, mode=0o700)
    atexit.register(shutil.rmtree, mine, ignore_errors=True)
    return mine


def _alive(pid: int) -> bool:
    """Whether a process of this host is running."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _breakdown(result: Any, distribution: str) -> tuple[float | None, float | None, int]:
    """(anls, accuracy, n) of one distribution from an EvaluationResult."""
    table = None
    for attribute in ("per_distribution", "by_distribution", "distribution"):
        table = getattr(result, attribute, None)
        if table:
            break
    entry = (table or {}).get(distribution)
    if entry is None:
        return None, None, 0
    if isinstance(entry, dict):
        return float(entry["anls"]), float(entry["accuracy"]), int(entry.get("n", 0))
    return float(entry.anls), float(entry.accuracy), int(getattr(entry, "n", 0))


def _dtype_name(dtype: Any) -> str:
    """A safetensors dtype name (``F32``) from a torch dtype or a name."""
    names = {
        "float32": "F32",
        "float16": "F16",
        "bfloat16": "BF16",
        "float64": "F64",
        "int64": "I64",
        "int32": "I32",
        "int16": "I16",
        "int8": "I8",
        "uint8": "U8",
        "bool": "BOOL",
    }
    text = str(dtype).removeprefix("torch.")
    return names.get(text, text)
