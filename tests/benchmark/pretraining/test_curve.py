"""The learning-curve plot of a pre-training run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmark.pretraining.curve import plot_curve, read_curve


def test_curve_is_read_in_step_order_and_plotted(tmp_path: Path) -> None:
    entries = [{"step": s, "heldout_value_anls": a, "heldout_value_anls_moved_layout": a / 2}
               for s, a in ((500, 0.4), (250, 0.1))]
    (tmp_path / "learning_curve.jsonl").write_text(
        "".join(json.dumps(e) + "\n" for e in entries))
    curve = read_curve(tmp_path)
    assert [e["step"] for e in curve] == [250, 500]
    image = plot_curve(curve, tmp_path / "plots" / "curve.png")
    assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_directory_without_a_curve_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="pflkit pretrain"):
        read_curve(tmp_path)


def test_a_family_runs_curve_is_plotted_with_its_loss(tmp_path: Path) -> None:
    from benchmark.pretraining.curve import plot_any_curve

    entries = [{"step": s, "loss": 9.0 / s, "val_anls": 0.1 * s, "answer_prior_anls": 0.2,
                "val_anls_unseen_values": None if s == 1 else 0.0} for s in (1, 2, 3)]
    image = plot_any_curve(entries, tmp_path / "family.png")
    assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
