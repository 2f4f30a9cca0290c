"""A public-layout VT5 checkpoint, converted, answers exactly as the official pipeline does.

The checkpoint is random (the public code's layout: a T5 `config.json`, `pytorch_model.bin`
with the token embedding under its three names and an `lm_head` of its own that differs from it,
as the public code's fine-tuning leaves it, `spiece.model`, and a DiT directory whose
`preprocessor_config.json` asks for bilinear resizing and whose config has no mask token). The
reference is `official_pipeline.py`, a step-by-step restatement of the starter kit's pipeline that
shares no code with the kit's input construction or decoding. The records come from a generated
`tiny` benchmark written in the real layout, plus edge cases: a box coordinate of 0.99999999
stored as float64, a word that is a sentinel token, upper-case words.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from benchmark.communication_log import LM_HEAD_NAME, TOKEN_EMBEDDING_NAMES
from benchmark.data import load_split
from benchmark.data.imdb import read_imdb, write_imdb
from benchmark.evaluation import predict
from benchmark.model import load_model, load_processor, load_tokenizer
from benchmark.model.conversion import convert_public_checkpoint
from benchmark.model.safetensors_header import CheckpointError
from tests.benchmark.model.official_pipeline import EXTRA_IDS, OfficialPipeline
from tests.benchmark.model.public_layout import DIT_FLAGS, write_public_layout


def _edge_case_split(tiny_benchmark: Path, root: Path) -> Path:
    """The tiny val records (first 40) plus edge cases, in the real layout."""
    source = tiny_benchmark / "participant"
    header, records = read_imdb(source / "imdb_val.npy")
    records = [dict(record) for record in records[:40]]
    edge = dict(records[0])
    boxes = np.asarray(edge["ocr_normalized_boxes"], dtype=np.float64).copy()
    boxes[0] = [0.99999999, 0.5, 0.99999999, 0.99999999]
    edge["ocr_normalized_boxes"] = boxes
    edge["ocr_tokens"] = ["<extra_id_0>", "TOTAL"] + list(edge["ocr_tokens"][2:])
    edge["question_id"] = 10_000
    records.append(edge)
    target = root / "data"
    target.mkdir()
    write_imdb(target / "imdb_val.npy", header, records)
    (target / "images").symlink_to(source / "images")
    return target


@pytest.fixture(scope="module")
def public_checkpoint(tmp_path_factory, spiece_dir) -> tuple[Path, Path]:
    return write_public_layout(tmp_path_factory.mktemp("public-vt5"), spiece_dir)


def test_conversion_reads_the_public_layout_and_records_its_settings(public_checkpoint, tmp_path):
    public, dit = public_checkpoint
    report = convert_public_checkpoint(public, tmp_path / "kit", visual_dir=dit)
    config = report.config
    assert report.weights_file == "pytorch_model.bin"
    assert report.tied_names == list(TOKEN_EMBEDDING_NAMES)
    assert config.tie_lm_head is False and report.lm_head.startswith("differs from shared")
    assert config.lowercase_text is True and config.image_resample == "bilinear"
    assert config.max_answer_tokens == 19 and config.box_scale == 1.0
    assert config.visual_config["use_mask_token"] is False
    assert config.image_size == 64
    text = "\n".join(report.lines())
    assert "lowercase_text=True" in text and "image_resample=bilinear" in text
    tokenizer = load_tokenizer(tmp_path / "kit")
    pieces = len(tokenizer) - EXTRA_IDS
    assert tokenizer.convert_tokens_to_ids("<extra_id_0>") == pieces + EXTRA_IDS - 1
    assert tokenizer.convert_tokens_to_ids("<extra_id_99>") == pieces


def test_without_a_dit_config_the_flags_are_read_off_the_tensors(public_checkpoint, tmp_path):
    public, _ = public_checkpoint
    config = convert_public_checkpoint(public, tmp_path / "kit").config
    assert config.visual_config["use_mask_token"] is False
    assert config.visual_config["use_mean_pooling"] is True
    assert config.image_size == 64 and config.image_resample == "bilinear"


def test_a_dit_config_that_contradicts_the_tensors_is_refused(public_checkpoint, tmp_path):
    public, dit = public_checkpoint
    wrong = tmp_path / "dit"
    shutil.copytree(dit, wrong)
    (wrong / "config.json").write_text(json.dumps({"model_type": "beit", **DIT_FLAGS,
                                                   "use_mask_token": True}))
    with pytest.raises(CheckpointError, match="use_mask_token is True but"):
        convert_public_checkpoint(public, tmp_path / "kit", visual_dir=wrong)
    assert not (tmp_path / "kit").exists()


def test_lm_head_is_kept_apart_from_shared_as_the_public_code_trains_it(public_checkpoint,
                                                                       tmp_path):
    public, dit = public_checkpoint
    state = torch.load(public / "pytorch_model.bin", weights_only=True)
    convert_public_checkpoint(public, tmp_path / "kit", visual_dir=dit)
    backbone = load_model(tmp_path / "kit").language_backbone
    assert backbone.lm_head.weight is not backbone.shared.weight
    assert backbone.encoder.embed_tokens.weight is backbone.shared.weight
    assert backbone.decoder.embed_tokens.weight is backbone.shared.weight
    assert torch.equal(backbone.lm_head.weight, state[LM_HEAD_NAME])
    assert torch.equal(backbone.shared.weight, state[TOKEN_EMBEDDING_NAMES[0]])
    assert backbone.config.scale_decoder_outputs  # T5's tied scaling stays on, as in 4.27

    equal = tmp_path / "equal"
    shutil.copytree(public, equal)
    torch.save({**state, LM_HEAD_NAME: state[TOKEN_EMBEDDING_NAMES[0]].clone()},
               equal / "pytorch_model.bin")
    report = convert_public_checkpoint(equal, tmp_path / "kit-equal", visual_dir=dit)
    assert report.config.tie_lm_head is False and report.lm_head.startswith("equal to shared")
    headless = tmp_path / "headless"
    shutil.copytree(public, headless)
    torch.save({k: v for k, v in state.items() if k != LM_HEAD_NAME},
               headless / "pytorch_model.bin")
    report = convert_public_checkpoint(headless, tmp_path / "kit-headless", visual_dir=dit)
    assert report.lm_head.startswith("not in the file")
    head = load_model(tmp_path / "kit-headless").language_backbone.lm_head.weight
    assert torch.equal(head, state[TOKEN_EMBEDDING_NAMES[0]])


def test_unequal_embedding_copies_and_non_tensor_bins_are_refused(public_checkpoint, tmp_path):
    public, dit = public_checkpoint
    state = torch.load(public / "pytorch_model.bin", weights_only=True)
    bad = tmp_path / "bad"
    shutil.copytree(public, bad)
    name = "language_backbone.encoder.embed_tokens.weight"
    torch.save({**state, name: state[name] + 1e-3}, bad / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match="encoder.embed_tokens.weight differs from "
                       "language_backbone.shared.weight; the public VT5 code holds the T5 "
                       "token embedding once"):
        convert_public_checkpoint(bad, tmp_path / "kit", visual_dir=dit)
    torch.save({"weights": state, "epoch": 3}, bad / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match="'weights' is a dict, not a tensor"):
        convert_public_checkpoint(bad, tmp_path / "kit", visual_dir=dit)
    torch.save({"step": 3, **state}, bad / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match="'step' is a int, not a tensor"):
        convert_public_checkpoint(bad, tmp_path / "kit", visual_dir=dit)
    assert not (tmp_path / "kit").exists()


def test_every_answer_equals_the_official_pipeline_at_batch_size_1(
    public_checkpoint, tiny_benchmark, tmp_path
):
    public, dit = public_checkpoint
    data = _edge_case_split(tiny_benchmark, tmp_path)
    convert_public_checkpoint(public, tmp_path / "kit", visual_dir=dit)
    model, processor = load_model(tmp_path / "kit"), load_processor(tmp_path / "kit")
    dataset = load_split(data, "val")
    official = OfficialPipeline(public, dit)
    samples = official.read_records(data / "imdb_val.npy", data / "images")

    expected = [official.answer(sample)[0].strip() for sample in samples]
    for batch_size in (1, 8):
        predictions = predict(model, processor, dataset, batch_size=batch_size, progress=False)
        differing = [(i, p, e) for i, (p, e) in enumerate(zip(predictions, expected, strict=True))
                     if p != e]
        assert not differing, f"batch size {batch_size}: {differing[:5]}"
    lengths = {len(answer) for answer in expected}
    assert len(lengths) > 3, "the random model should give answers of several lengths"

    edge = samples[-1]
    row = processor([dataset[-1]["question"]], [dataset[-1]["ocr_tokens"]],
                    [dataset[-1]["ocr_boxes"]], images=[dataset[-1]["image_path"]])
    assert row["boxes"][0, len(official.tokenizer.ids(
        f"question: {edge['question']}  context: "))].tolist()[:4] == [0, 0, 0, 0]
    for index in (0, 7, len(samples) - 1):
        _, official_logits = official.answer(samples[index])
        record = dataset[index]
        batch = processor([record["question"]], [record["ocr_tokens"]], [record["ocr_boxes"]],
                          images=[record["image_path"]])
        with torch.inference_mode():
            logits = model(**batch).logits[0, 0]
        torch.testing.assert_close(logits, official_logits, rtol=1e-4, atol=1e-5)


def test_pflkit_model_convert_prints_what_it_did_and_refuses_a_bin_of_objects(
    public_checkpoint, tmp_path
):
    from click.testing import CliRunner

    from pflkit.cli import main

    public, dit = public_checkpoint
    result = CliRunner().invoke(main, ["model", "convert", str(public), str(tmp_path / "kit"),
                                       "--visual", str(dit)])
    assert result.exit_code == 0, result.output
    assert "pytorch_model.bin" in result.output and "lowercase_text=True" in result.output
    assert "shared, encoder.embed_tokens.weight" not in result.output
    assert "shared.weight, encoder.embed_tokens.weight, decoder.embed_tokens.weight: " \
           "all equal" in result.output
    assert "lm_head: differs from shared (trained apart by the public code); kept as its own " \
           "tensor" in result.output
    assert load_model(tmp_path / "kit").config.image_resample == "bilinear"

    bad = tmp_path / "bad"
    shutil.copytree(public, bad)
    torch.save({"model": [1, 2, 3]}, bad / "pytorch_model.bin")
    result = CliRunner().invoke(main, ["model", "convert", str(bad), str(tmp_path / "other")])
    assert result.exit_code == 1
    assert "entry 'model' is a list, not a tensor" in result.output
    assert not (tmp_path / "other").exists()
