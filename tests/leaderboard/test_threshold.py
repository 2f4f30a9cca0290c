"""The track-1 threshold comes from benchmark.json when it states one, else from the setting."""

from __future__ import annotations

import json

import pytest

from benchmark.threshold import THRESHOLD_ENV, track1_threshold
from leaderboard.formatting import human_bytes


def test_threshold_from_benchmark_json_then_setting(tmp_path, monkeypatch):
    monkeypatch.delenv(THRESHOLD_ENV, raising=False)
    assert track1_threshold(None) == (0.8242, "setting")
    (tmp_path / "benchmark.json").write_text(json.dumps({"scale": "mini"}))
    assert track1_threshold(tmp_path) == (0.8242, "setting")
    monkeypatch.setenv(THRESHOLD_ENV, "0.5")
    assert track1_threshold(tmp_path) == (0.5, "setting")
    (tmp_path / "benchmark.json").write_text(json.dumps({"track1_threshold": 0.4321}))
    assert track1_threshold(tmp_path) == (0.4321, str(tmp_path / "benchmark.json"))


def test_bad_thresholds_say_what_is_wrong(tmp_path, monkeypatch):
    (tmp_path / "benchmark.json").write_text(json.dumps({"track1_threshold": 82.4}))
    with pytest.raises(ValueError, match="track1_threshold must be an ANLS"):
        track1_threshold(tmp_path)
    monkeypatch.setenv(THRESHOLD_ENV, "high")
    with pytest.raises(ValueError, match="not a number"):
        track1_threshold(None)


def test_human_bytes():
    assert [human_bytes(v) for v in (None, 0, 999, 1000, 7_700_000, 44_650_000_000)] == [
        "-",
        "0 B",
        "999 B",
        "1 kB",
        "7.7 MB",
        "44.6 GB",
    ]
