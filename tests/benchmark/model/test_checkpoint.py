"""Checkpoint directories: save/load round trip, `base`, and refusal of bad files."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

import benchmark.model.loading as loading
from benchmark.model import (
    CheckpointError,
    VT5ForConditionalGeneration,
    VT5Processor,
    convert_reference_checkpoint,
    expected_tensor_spec,
    load_model,
    load_processor,
    save_checkpoint,
    tiny_vt5_config,
    validate_checkpoint_dir,
    validate_safetensors_file,
)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, tiny_model, processor) -> Path:
    """The tiny model and its tokenizer saved with `save_checkpoint`."""
    return save_checkpoint(tiny_model, processor, tmp_path_factory.mktemp("ckpt") / "tiny")


def _copy(checkpoint: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(checkpoint, target)
    return target


def _batch(processor, records):
    return processor(
        [r["question"] for r in records[:2]],
        [r["ocr_tokens"] for r in records[:2]],
        [r["ocr_boxes"] for r in records[:2]],
        images=[r["image_path"] for r in records[:2]],
    )


def test_round_trip_gives_the_same_model_and_tokenizer(checkpoint, tiny_model, processor, records):
    files = {p.name for p in checkpoint.iterdir()}
    assert {"config.json", "model.safetensors", "spiece.model", "tokenizer.json"} <= files
    assert json.loads((checkpoint / "config.json").read_text())["model_type"] == "vt5"
    model = load_model(checkpoint)
    reloaded_processor = load_processor(checkpoint)
    assert not model.training
    original = tiny_model.state_dict()
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, original[name]), name
    backbone = model.language_backbone
    assert backbone.lm_head.weight is backbone.shared.weight
    assert backbone.decoder.embed_tokens.weight is backbone.shared.weight
    batch = _batch(reloaded_processor, records)
    with torch.inference_mode():
        torch.testing.assert_close(model(**batch).encoder_last_hidden_state,
                                   tiny_model(**batch).encoder_last_hidden_state)
        assert model.generate(**batch, max_new_tokens=5).tolist() == tiny_model.generate(
            **batch, max_new_tokens=5).tolist()
    assert reloaded_processor.box_scale == processor.box_scale
    assert reloaded_processor.signature == processor.signature


def test_saved_file_holds_each_tensor_once_with_the_expected_spec(checkpoint, tiny_model):
    spec = expected_tensor_spec(tiny_model.config)
    tensors = load_file(str(checkpoint / "model.safetensors"))
    assert set(tensors) == set(spec)
    assert "language_backbone.shared.weight" in spec
    assert "language_backbone.lm_head.weight" not in spec  # tied alias, stored once
    for name, (shape, dtype) in spec.items():
        assert tuple(tensors[name].shape) == shape and dtype == "F32"
    validate_checkpoint_dir(checkpoint)


def test_save_checkpoint_replaces_an_existing_directory(checkpoint, tiny_model, processor, tmp_path):
    target = _copy(checkpoint, tmp_path)
    (target / "stale.txt").write_text("old")
    save_checkpoint(tiny_model, processor, target)
    assert not (target / "stale.txt").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    validate_checkpoint_dir(target)


def _rewrite(path: Path, edit) -> None:
    tensors = load_file(str(path))
    edit(tensors)
    save_file(tensors, str(path))


def test_wrong_shape_is_named(checkpoint, tmp_path):
    target = _copy(checkpoint, tmp_path)
    name = "spatial_embedding.x_position_embeddings.weight"
    _rewrite(target / "model.safetensors", lambda t: t.__setitem__(name, torch.zeros(1024, 16)))
    with pytest.raises(CheckpointError, match=rf"model\.safetensors.*{name}.*shape \[1024, 16\].*\[1024, 32\]"):
        load_model(target)


def test_nan_is_refused(checkpoint, tmp_path):
    target = _copy(checkpoint, tmp_path)
    name = "visual_embedding.visual_emb_matcher.layers.0.bias"

    def poison(tensors):
        tensors[name] = tensors[name].clone()
        tensors[name][3] = float("nan")

    _rewrite(target / "model.safetensors", poison)
    with pytest.raises(CheckpointError, match=rf"{name}.*NaN"):
        validate_checkpoint_dir(target)


def test_missing_tensor_is_named(checkpoint, tmp_path):
    target = _copy(checkpoint, tmp_path)
    name = "language_backbone.decoder.final_layer_norm.weight"
    _rewrite(target / "model.safetensors", lambda t: t.pop(name))
    with pytest.raises(CheckpointError, match=rf"1 missing tensor\(s\): {name}"):
        load_model(target)


def test_wrong_dtype_and_extra_tensor_are_named(checkpoint, tiny_model, tmp_path):
    spec = expected_tensor_spec(tiny_model.config)
    path = tmp_path / "model.safetensors"
    tensors = load_file(str(checkpoint / "model.safetensors"))
    tensors["spatial_embedding.LayerNorm.bias"] = tensors["spatial_embedding.LayerNorm.bias"].half()
    tensors["backdoor"] = torch.zeros(3)
    save_file(tensors, str(path))
    with pytest.raises(CheckpointError) as error:
        validate_safetensors_file(path, spec)
    assert "unexpected tensor(s): backdoor" in str(error.value)
    assert "LayerNorm.bias' has dtype F16, expected F32" in str(error.value)


def test_pickle_renamed_safetensors_is_refused_unopened(checkpoint, tmp_path):
    target = _copy(checkpoint, tmp_path)
    state = load_file(str(checkpoint / "model.safetensors"))
    torch.save(state, target / "model.safetensors")
    with pytest.raises(CheckpointError, match="pickle/zip"):
        load_model(target)
    (target / "model.safetensors").write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(CheckpointError, match="pickle/zip"):
        validate_checkpoint_dir(target)


def test_truncated_file_is_refused(checkpoint, tmp_path):
    target = _copy(checkpoint, tmp_path)
    path = target / "model.safetensors"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated"):
        validate_checkpoint_dir(target)
    path.write_bytes(data[:5])
    with pytest.raises(CheckpointError, match="too short"):
        validate_checkpoint_dir(target)


def test_oversized_header_is_refused(tmp_path, tiny_model):
    path = tmp_path / "model.safetensors"
    path.write_bytes((2**40).to_bytes(8, "little") + b"{}")
    with pytest.raises(CheckpointError, match="exceeds the limit"):
        validate_safetensors_file(path, expected_tensor_spec(tiny_model.config))


def test_missing_files_and_foreign_configs_are_named(checkpoint, tmp_path):
    target = _copy(checkpoint, tmp_path)
    (target / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"model\.safetensors: missing"):
        load_model(target)
    target = tmp_path / "t5"
    shutil.copytree(checkpoint, target)
    (target / "config.json").write_text(json.dumps({"model_type": "t5", "d_model": 768}))
    with pytest.raises(CheckpointError, match=r"config\.json: model_type is 't5', expected 'vt5'"):
        load_model(target)
    with pytest.raises(CheckpointError, match="not a VT5 checkpoint"):
        load_processor(target)
    (target / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        load_model(target)
    (target / "config.json").unlink()
    with pytest.raises(CheckpointError, match=r"config\.json: missing"):
        load_model(target)
    with pytest.raises(FileNotFoundError, match="checkpoint directory not found"):
        load_model(tmp_path / "nowhere")


def test_missing_tokenizer_is_named(checkpoint, tmp_path):
    target = _copy(checkpoint, tmp_path)
    for name in ("tokenizer.json", "spiece.model", "tokenizer_config.json"):
        (target / name).unlink()
    with pytest.raises(FileNotFoundError, match="no tokenizer"):
        load_processor(target)


def test_base_resolves_to_the_shipped_directory(checkpoint, tmp_path, monkeypatch):
    monkeypatch.setattr(loading, "BASE_MODEL_DIR", tmp_path / "assets" / "base")
    with pytest.raises(FileNotFoundError, match="pflkit pretrain"):
        load_model("base")
    shutil.copytree(checkpoint, tmp_path / "assets" / "base")
    assert load_processor("base").box_scale == 1000.0
    assert load_model("base").config.model_type == "vt5"


def test_public_code_checkpoint_converts_and_runs_the_same(tmp_path, processor, records):
    visual = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
              "num_attention_heads": 2}
    config = tiny_vt5_config(
        len(processor.tokenizer),
        language_config={"d_model": 64, "d_ff": 128, "num_layers": 1, "num_decoder_layers": 1,
                         "num_heads": 2},
        visual_config=visual, spatial_embedding_dim=None, box_scale=1.0,
    )
    torch.manual_seed(4)
    model = VT5ForConditionalGeneration(config).eval()
    ours = save_checkpoint(model, VT5Processor.from_config(processor.tokenizer, config)
                           .with_spiece_model(processor._source_dir), tmp_path / "ours")
    # the public code's layout: a plain T5 config.json next to the same weights and tokenizer
    public = tmp_path / "public"
    public.mkdir()
    t5 = {**config.t5_config.to_dict(), "model_type": "t5", "max_2d_position_embeddings": 1024}
    (public / "config.json").write_text(json.dumps(t5))
    for name in ("model.safetensors", "spiece.model", "tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(ours / name, public / name)
    with pytest.raises(CheckpointError, match="not a VT5 checkpoint"):
        load_model(public)
    converted = convert_reference_checkpoint(public, tmp_path / "converted",
                                             visual_config=config.visual_config)
    assert converted.box_scale == 1.0 and converted.spatial_dim == 64
    reloaded, reloaded_processor = load_model(tmp_path / "converted"), load_processor(tmp_path / "converted")
    batch = reloaded_processor(
        [r["question"] for r in records[:2]], [r["ocr_tokens"] for r in records[:2]],
        [r["ocr_boxes"] for r in records[:2]], images=[r["image_path"] for r in records[:2]],
    )
    with torch.inference_mode():
        torch.testing.assert_close(reloaded(**batch).logits, model(**batch).logits)
