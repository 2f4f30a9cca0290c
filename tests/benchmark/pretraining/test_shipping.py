"""Shipping a checkpoint as the base model, and the shipped base's checksums."""

from __future__ import annotations

from pathlib import Path

from benchmark.model.loading import BASE_MODEL_DIR
from benchmark.pretraining.shipping import ship, verify_checksums


def test_ship_copies_a_checkpoint_with_checksums(tmp_path: Path) -> None:
    checkpoint = tmp_path / "step-000010"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text('{"model_type": "vt5"}')
    (checkpoint / "model.safetensors").write_bytes(b"weights")
    (checkpoint / "trainer_state.pt").write_bytes(b"optimizer state")
    target = ship(checkpoint, tmp_path / "base")
    assert sorted(p.name for p in target.iterdir()) == ["SHA256SUMS", "config.json", "model.safetensors"]
    assert verify_checksums(target) == []
    (target / "model.safetensors").write_bytes(b"tampered")
    assert verify_checksums(target) == ["model.safetensors"]
    (target / "config.json").unlink()
    assert verify_checksums(target) == ["config.json", "model.safetensors"]


def test_the_shipped_base_matches_its_checksums() -> None:
    assert (BASE_MODEL_DIR / "model.safetensors").is_file(), "the base model is not shipped"
    assert verify_checksums(BASE_MODEL_DIR) == []
