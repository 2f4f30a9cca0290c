"""Checkpoint validation: structure, limits, spec and finite values, never unpickling."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from evaluator.validation import InvalidSubmission
from evaluator.validation.checkpoint import read_header, validate_checkpoint
from tests.evaluator.factories import pickle_bomb, small_safetensors, truncated, with_header_len

LIMITS = {"max_header_bytes": 1024 * 1024, "max_tensors": 100}
SPEC = {"a.weight": ((4, 3), "F32"), "b.bias": ((5,), "F32")}


def test_valid_file_passes(tmp_path: Path) -> None:
    header = validate_checkpoint(small_safetensors(tmp_path / "m.safetensors"), SPEC, **LIMITS)
    assert header.tensors == SPEC
    assert header.parameters == 17


def test_pickle_renamed_is_refused_and_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "payload-ran"
    path = tmp_path / "model.safetensors"
    path.write_bytes(pickle_bomb(marker))
    with pytest.raises(InvalidSubmission, match="not a safetensors file"):
        validate_checkpoint(path, SPEC, **LIMITS)
    assert not marker.exists()


def test_zip_archive_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    path.write_bytes(b"PK\x03\x04" + b"\x00" * 100)
    with pytest.raises(InvalidSubmission, match="model:"):
        read_header(path, **LIMITS)


def test_truncated_file(tmp_path: Path) -> None:
    good = small_safetensors(tmp_path / "good.safetensors")
    path = tmp_path / "model.safetensors"
    path.write_bytes(truncated(good, keep=0.8))
    with pytest.raises(InvalidSubmission, match="truncated"):
        validate_checkpoint(path, SPEC, **LIMITS)
    path.write_bytes(good.read_bytes()[:5])
    with pytest.raises(InvalidSubmission, match="too short"):
        read_header(path, **LIMITS)


def test_header_longer_than_file(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    path.write_bytes(with_header_len(1000, b"{}"))
    with pytest.raises(InvalidSubmission, match="truncated file"):
        read_header(path, **LIMITS)


def test_header_over_limit(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    path.write_bytes(with_header_len(2 * 1024 * 1024, b"{}"))
    with pytest.raises(InvalidSubmission, match="exceeds the limit"):
        read_header(path, **LIMITS)


@pytest.mark.parametrize(
    "header",
    [
        b"not json",
        b"[1, 2]",
        json.dumps({"x": {"dtype": "F32"}}).encode(),
        json.dumps({"x": {"dtype": "Q7", "shape": [1], "data_offsets": [0, 4]}}).encode(),
        json.dumps({"x": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}).encode(),
    ],
)
def test_malformed_headers(tmp_path: Path, header: bytes) -> None:
    path = tmp_path / "model.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\x00" * 4)
    with pytest.raises(InvalidSubmission):
        read_header(path, **LIMITS)


def test_overlapping_offsets_are_refused(tmp_path: Path) -> None:
    header = json.dumps(
        {
            "x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
            "y": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
        }
    ).encode()
    path = tmp_path / "model.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\x00" * 4)
    with pytest.raises(InvalidSubmission, match="overlap"):
        read_header(path, **LIMITS)


def test_too_many_tensors(tmp_path: Path) -> None:
    tensors = {f"t{i}": np.zeros(1, np.float32) for i in range(5)}
    path = small_safetensors(tmp_path / "m.safetensors", tensors)
    with pytest.raises(InvalidSubmission, match="exceed the limit"):
        read_header(path, max_header_bytes=1024 * 1024, max_tensors=4)


def test_wrong_shapes_names_and_dtypes(tmp_path: Path) -> None:
    path = small_safetensors(
        tmp_path / "m.safetensors",
        {
            "a.weight": np.ones((3, 4), np.float32),
            "c.extra": np.ones(2, np.float32),
        },
    )
    with pytest.raises(InvalidSubmission) as error:
        validate_checkpoint(path, SPEC, **LIMITS)
    message = str(error.value)
    assert "1 missing tensors (b.bias)" in message
    assert "1 unexpected tensors (c.extra)" in message
    assert "a.weight: [3, 4] F32, expected [4, 3] F32" in message
    path = small_safetensors(
        tmp_path / "d.safetensors",
        {"a.weight": np.ones((4, 3), np.float16), "b.bias": np.zeros(5, np.float32)},
    )
    with pytest.raises(InvalidSubmission, match="F16, expected \\[4, 3\\] F32"):
        validate_checkpoint(path, SPEC, **LIMITS)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_weights(tmp_path: Path, bad: float) -> None:
    weights = np.ones((4, 3), np.float32)
    weights[2, 1] = bad
    path = small_safetensors(
        tmp_path / "m.safetensors", {"a.weight": weights, "b.bias": np.zeros(5, np.float32)}
    )
    with pytest.raises(InvalidSubmission, match="NaN or infinite values \\(a.weight\\)"):
        validate_checkpoint(path, SPEC, **LIMITS)
    validate_checkpoint(path, SPEC, finite=False, **LIMITS)


def test_real_vt5_checkpoint_matches_benchmark_spec(tiny_reference: Path) -> None:
    from evaluator.scoring import Scorer

    scorer = Scorer(tiny_reference, reference_model=str(tiny_reference))
    header = validate_checkpoint(
        tiny_reference / "model.safetensors",
        scorer.expected_spec,
        max_header_bytes=16 * 1024 * 1024,
        max_tensors=100_000,
    )
    assert header.parameters > 1_000_000
    assert set(header.tensors) == set(scorer.expected_spec)
