"""The track-1 threshold stored with a benchmark, and the kit's measured thresholds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmark import threshold as thresholds
from benchmark.shipped import BASE_MODEL_DIR
from benchmark.threshold import (
    base_model_digest,
    measured_threshold,
    threshold_from,
    write_threshold,
)


def test_threshold_is_95_percent_rounded_like_the_competitions() -> None:
    assert threshold_from(0.8676) == 0.8242  # the competition's 0.95 x 0.8676
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        threshold_from(86.76)


def test_write_threshold_keeps_the_rest_and_leaves_no_staging_file(tmp_path: Path) -> None:
    (tmp_path / "benchmark.json").write_text(json.dumps({"scale": "mini", "seed": 3}))
    assert write_threshold(tmp_path, 0.5, {"run": "r"}) == 0.475
    summary = json.loads((tmp_path / "benchmark.json").read_text())
    assert summary == {"scale": "mini", "seed": 3, "track1_threshold": 0.475,
                       "track1_threshold_source": {"fedavg_test_anls": 0.5, "run": "r"}}
    assert [p.name for p in tmp_path.iterdir()] == ["benchmark.json"]


def test_write_threshold_needs_a_benchmark_directory(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="pflkit data generate"):
        write_threshold(tmp_path, 0.5, {})


def test_the_shipped_base_has_a_listed_digest() -> None:
    digest = base_model_digest(BASE_MODEL_DIR)
    assert digest is not None and len(digest) == 64


def test_a_measured_threshold_applies_only_to_the_base_it_was_measured_with(monkeypatch) -> None:
    entry = {"fedavg_test_anls": 0.6, "base_sha256": base_model_digest(BASE_MODEL_DIR)}
    monkeypatch.setitem(thresholds.MEASURED_FEDAVG_TEST_ANLS, ("tiny", 7), entry)
    assert measured_threshold("tiny", 7, BASE_MODEL_DIR)["track1_threshold"] == 0.57
    assert measured_threshold("tiny", 8, BASE_MODEL_DIR) is None
    monkeypatch.setitem(thresholds.MEASURED_FEDAVG_TEST_ANLS, ("tiny", 7),
                        {**entry, "base_sha256": "0" * 64})
    assert measured_threshold("tiny", 7, BASE_MODEL_DIR) is None


def test_generate_writes_the_measured_threshold(monkeypatch, tmp_path: Path) -> None:
    from benchmark.data.synthetic import generate_benchmark

    entry = {"fedavg_test_anls": 0.6, "base_sha256": base_model_digest(BASE_MODEL_DIR)}
    monkeypatch.setitem(thresholds.MEASURED_FEDAVG_TEST_ANLS, ("tiny", 0), entry)
    summary = generate_benchmark(tmp_path / "b", "tiny", 0, public_documents=0, workers=1,
                                 progress=False)
    written = json.loads((tmp_path / "b" / "benchmark.json").read_text())
    assert written["track1_threshold"] == summary["track1_threshold"] == 0.57


def test_the_embedded_mini_threshold_belongs_to_the_shipped_base() -> None:
    entry = measured_threshold("mini", 0, BASE_MODEL_DIR)
    assert entry is not None, (
        "the shipped base changed: re-run the fedavg preset on mini seed 0, then "
        "`pflkit data threshold` and update MEASURED_FEDAVG_TEST_ANLS"
    )
    assert 0.0 < entry["track1_threshold"] < 1.0
