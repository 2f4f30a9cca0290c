"""Checkpoint validation: a safetensors file checked without unpickling.

Used by the model loaders (``benchmark.model.checkpoint``), by track 3's personalisations and by
the scoring service on submitted checkpoints. The header is parsed and checked first
(:mod:`benchmark.model.safetensors_header`); then the tensors are checked against the expected
names, shapes and dtypes and, when asked, their values. Nothing here imports torch until the
values are read (:func:`check_finite`).
"""

from __future__ import annotations

from pathlib import Path

from benchmark.model.safetensors_header import (
    FLOAT_DTYPES,
    MAX_HEADER_BYTES,
    MAX_TENSORS,
    SafetensorsError,
    SafetensorsHeader,
    TensorSpec,
    read_safetensors_header,
    some,
)
from benchmark.model.tensor_file import TensorFile


class SpecMismatch(SafetensorsError):
    """A well-formed safetensors file whose tensors are not the expected ones.

    Attributes:
        missing: expected names the file lacks.
        unexpected: names the file holds that are not expected.
        wrong: ``(name, found, expected)`` for tensors of the wrong shape or dtype, found and
            expected being ``(shape, dtype)``.
    """

    def __init__(
        self,
        path: str | Path,
        missing: list[str],
        unexpected: list[str],
        wrong: list[tuple[str, tuple[tuple[int, ...], str], tuple[tuple[int, ...], str]]],
    ) -> None:
        self.missing, self.unexpected, self.wrong = missing, unexpected, wrong
        problems = []
        if missing:
            problems.append(f"{len(missing)} missing tensor(s): {some(missing)}")
        if unexpected:
            problems.append(f"{len(unexpected)} unexpected tensor(s): {some(unexpected)}")
        for name, (shape, dtype), (want_shape, want_dtype) in wrong:
            if tuple(shape) != tuple(want_shape):
                problems.append(
                    f"tensor {name!r} has shape {list(shape)}, expected {list(want_shape)}"
                )
            if dtype != want_dtype:
                problems.append(f"tensor {name!r} has dtype {dtype}, expected {want_dtype}")
        super().__init__(path, "; ".join(problems[:8]))


class NonFiniteTensors(SafetensorsError):
    """Tensors holding NaN or infinite values.

    Attributes:
        names: the tensors at fault, in file order.
    """

    def __init__(self, path: str | Path, names: list[str]) -> None:
        self.names = names
        super().__init__(path, f"tensor(s) {some(names)} hold NaN or infinite values")


def check_against_spec(
    path: str | Path, header: SafetensorsHeader, spec: TensorSpec, *, subset: bool = False
) -> None:
    """Require exactly the expected tensor names, shapes and dtypes.

    Args:
        path: the file the header was read from (named in the error).
        header: its parsed header.
        spec: `{name: (shape, dtype)}`, e.g. from `expected_tensor_spec`.
        subset: the file may hold any subset of the specified tensors (a track-3
            personalisation); by default it must hold all of them.

    Raises:
        SpecMismatch: listing the missing, unexpected and mismatched tensors.
    """
    missing = [] if subset else sorted(set(spec) - set(header.tensors))
    unexpected = sorted(set(header.tensors) - set(spec))
    wrong = [
        (name, header.tensors[name], (tuple(spec[name][0]), spec[name][1]))
        for name in sorted(set(spec) & set(header.tensors))
        if tuple(header.tensors[name][0]) != tuple(spec[name][0])
        or header.tensors[name][1] != spec[name][1]
    ]
    if missing or unexpected or wrong:
        raise SpecMismatch(path, missing, unexpected, wrong)


def check_finite(path: str | Path, header: SafetensorsHeader) -> None:
    """Refuse NaN or infinite values, reading one floating-point tensor at a time (no pickle).

    The tensors are read with plain file reads (:class:`benchmark.model.tensor_file.TensorFile`),
    not through a mapping of the whole file, so the check holds one tensor in memory at a time.

    Args:
        path: the file.
        header: its parsed header.

    Raises:
        NonFiniteTensors: naming the tensors that hold NaN or inf.
        SafetensorsError: the data cannot be read (the file changed since its header was read).
    """
    import torch

    bad: list[str] = []
    try:
        with TensorFile(path, header) as handle:
            for name, (_, dtype) in header.tensors.items():
                if dtype in FLOAT_DTYPES and not bool(
                    torch.isfinite(handle.get_tensor(name)).all()
                ):
                    bad.append(name)
    except OSError as error:
        raise SafetensorsError(path, f"cannot be read ({error})") from None
    if bad:
        raise NonFiniteTensors(path, bad)


def validate_safetensors_file(
    path: str | Path,
    spec: TensorSpec,
    *,
    max_header_bytes: int = MAX_HEADER_BYTES,
    max_tensors: int = MAX_TENSORS,
    check_values: bool = True,
    subset: bool = False,
) -> SafetensorsHeader:
    """Check a safetensors file: its header, its tensors against a spec, its values.

    Args:
        path: the `.safetensors` file.
        spec: `{name: (shape, dtype)}`, e.g. from `expected_tensor_spec`.
        max_header_bytes: refuse headers larger than this.
        max_tensors: refuse files with more tensors than this.
        check_values: also read every tensor and refuse NaN or infinite values.
        subset: the file may hold any subset of the specified tensors (a track-3
            personalisation); by default it must hold all of them.

    Returns:
        The parsed header.

    Raises:
        SafetensorsError: naming the file and the first problems found (:class:`SpecMismatch`
            for missing, unexpected, wrongly shaped or typed tensors; :class:`NonFiniteTensors`
            for NaN or infinite values).
    """
    header = read_safetensors_header(
        path, max_header_bytes=max_header_bytes, max_tensors=max_tensors
    )
    check_against_spec(path, header, spec, subset=subset)
    if check_values:
        check_finite(path, header)
    return header
