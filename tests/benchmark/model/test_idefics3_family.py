"""The Idefics3 / SmolVLM family: a decoder-only vision-language model behind the family seam.

A random ``tiny`` checkpoint written by ``init_checkpoint`` is read, checked and refused when
wrong; the ``base`` shape is SmolVLM-256M-Instruct's, counted on the meta device; the page is cut
into tiles as the public checkpoint's processor cuts it and the prompt holds one ``<image>`` per
visual token; labels train the answer alone; prompts are padded on the left so an answer does
not depend on its batch; VT5-named options land on Idefics3's modules; a training step lowers
the loss; ``benchmark.evaluation`` answers; ``pflkit train`` runs ``lora-nf4`` and ``dp-lora``.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file, save_file

from baselines.cli import train
from baselines.methods.full import FullFineTuning
from baselines.methods.lora import LoRA
from baselines.presets import PRESETS
from benchmark.data import load_split
from benchmark.evaluation import evaluate
from benchmark.model import load_model, load_processor, read_checkpoint_config
from benchmark.model.families import FAMILIES, DocumentProcessor, family_named
from benchmark.model.families.idefics3 import Idefics3
from benchmark.model.families.idefics3.processing import (
    END_OF_UTTERANCE,
    FAKE_IMAGE_TOKEN,
    GLOBAL_IMAGE_TOKEN,
    IMAGE_TOKEN,
)
from benchmark.model.family_checkpoint import validate_checkpoint_dir
from benchmark.model.loading import save_checkpoint
from benchmark.model.random_init import init_checkpoint
from benchmark.model.safetensors_header import CheckpointError
from benchmark.shipped import BASE_MODEL_DIR

TRAIN = ("--rounds", "1", "--local-epochs", "1", "--val-limit", "0", "--threads", "1",
         "--no-progress", "--clients-per-round", "1")  # fmt: skip


@pytest.fixture(scope="module")
def smolvlm_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random tiny Idefics3 with the shipped tokenizer (`pflkit model init`)."""
    return init_checkpoint("tiny", tmp_path_factory.mktemp("smolvlm") / "base", family="idefics3")


def _rows(data: Path, count: int) -> list[dict]:
    return [dict(row) for row in load_split(data, "train", client=0).select(range(count))]


def test_the_family_is_found_by_model_type() -> None:
    assert FAMILIES["idefics3"] is Idefics3
    assert family_named("idefics3").public_checkpoint == "HuggingFaceTB/SmolVLM-256M-Instruct"


def test_a_tiny_checkpoint_round_trips_and_a_wrong_one_is_refused(
    smolvlm_base: Path, tmp_path: Path
) -> None:
    config = validate_checkpoint_dir(smolvlm_base)
    settings = (config.model_type, config.image_longest_edge, config.max_answer_tokens)
    assert settings == ("idefics3", 128, 20)
    model, processor = load_model(smolvlm_base), load_processor(smolvlm_base)
    assert isinstance(processor, DocumentProcessor)
    assert type(model).__name__ == "Idefics3ForDocumentVQA"
    assert len(processor.tokenizer) == config.text_config.vocab_size
    assert processor.tokenizer.convert_tokens_to_ids(IMAGE_TOKEN) == config.image_token_id
    assert (processor.tile_size, processor.image_seq_len) == (64, 16)
    copy = save_checkpoint(model, processor, tmp_path / "copy")
    again, again_processor = load_model(copy), load_processor(copy)
    reloaded = again.state_dict()
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, reloaded[name]), name
    assert again_processor.tokenizer.get_vocab() == processor.tokenizer.get_vocab()

    broken = tmp_path / "broken"
    broken.mkdir()
    for item in smolvlm_base.iterdir():
        (broken / item.name).write_bytes(item.read_bytes())
    tensors = load_file(broken / "model.safetensors")
    name = next(n for n in tensors if n.endswith("self_attn.q_proj.weight") and "text_model" in n)
    tensors[name] = torch.zeros(3, 3)
    save_file(tensors, broken / "model.safetensors")
    with pytest.raises(CheckpointError, match=name.replace(".", r"\.")):
        load_model(broken)
    raw = json.loads((broken / "config.json").read_text())
    (broken / "config.json").write_text(json.dumps({**raw, "image_longest_edge": 1024}))
    with pytest.raises(CheckpointError, match=r"invalid SmolVLM \(Idefics3\) configuration .*more "
                                              r"than 6 tiles"):  # fmt: skip
        read_checkpoint_config(broken)
    (broken / "config.json").write_text(json.dumps({**raw, "max_answer_tokens": 0}))
    with pytest.raises(CheckpointError, match="max_answer_tokens must be a positive integer"):
        read_checkpoint_config(broken)
    (broken / "config.json").write_text(json.dumps({**raw, "image_token_id": 4002}))
    with pytest.raises(ValueError, match="the tokenizer's <image> is id 4001, the model's "
                                         "image_token_id is 4002"):  # fmt: skip
        load_processor(broken)


def test_the_base_shape_is_smolvlm_256m_and_reads_a_page_as_its_processor_does() -> None:
    with torch.device("meta"):
        model, processor = Idefics3.random_model("base", BASE_MODEL_DIR)
    assert sum(p.numel() for p in model.parameters()) == 256_484_928
    text, vision = model.config.text_config, model.config.vision_config
    assert (text.hidden_size, text.num_hidden_layers, text.num_attention_heads,
            text.num_key_value_heads, text.intermediate_size, text.vocab_size) == (
        576, 30, 9, 3, 1536, 49280)  # fmt: skip
    assert (vision.hidden_size, vision.num_hidden_layers, vision.patch_size, vision.image_size) == (
        768, 12, 16, 512)  # fmt: skip
    assert model.lm_head.weight is not model.model.text_model.embed_tokens.weight  # untied
    # a 600 x 848 benchmark page: 2,048 pixels tall, 4 x 3 tiles of 512 + the global view
    assert processor.image_processor.get_number_of_image_patches(848, 600) == (13, 4, 3)
    block = processor.image_block(4, 3)
    assert block.count(processor.image_token_id) == 13 * 64
    assert len(processor.tokenizer) <= text.vocab_size


def test_the_prompt_holds_one_image_token_per_visual_token_and_labels_train_the_answer(
    smolvlm_base: Path, tiny_benchmark: Path
) -> None:
    processor = load_processor(smolvlm_base)
    rows = _rows(tiny_benchmark, 4)
    rows[1]["question"] = rows[1]["question"] + " and in which currency is it written down?"
    batch = processor.collate(rows, with_labels=True)
    tiles = batch["pixel_values"].shape[1]
    assert batch["pixel_values"].shape[2:] == (3, 64, 64) and tiles == 5  # 2 x 2 tiles + global
    ids, labels, mask = batch["input_ids"], batch["labels"], batch["attention_mask"]
    assert ((ids == processor.image_token_id).sum(dim=1) == tiles * processor.image_seq_len).all()
    vocab = processor.tokenizer.get_vocab()
    for row, record in enumerate(rows):
        length = int(mask[row].sum())
        assert mask[row, :length].all() and not mask[row, length:].any()  # padded on the right
        trained = labels[row][labels[row] != -100].tolist()
        assert trained == processor.answer_ids(record["answers"][0])
        assert trained[-1] == vocab[END_OF_UTTERANCE]
        assert ids[row, length - len(trained): length].tolist() == trained
        assert (labels[row, length:] == -100).all()
        assert processor.decode([trained]) == [" ".join(record["answers"][0].split())]
    first = ids[0].tolist()
    # one before each of the 4 tiles, two around the global view
    assert first.count(vocab[FAKE_IMAGE_TOKEN]) == 6 and first.count(vocab[GLOBAL_IMAGE_TOKEN]) == 1
    prompts = processor.collate(rows)
    assert "labels" not in prompts
    width = prompts["input_ids"].shape[1]
    for row in range(len(rows)):
        length = int(prompts["attention_mask"][row].sum())
        assert not prompts["attention_mask"][row, : width - length].any()  # padded on the left
    # what batches are grouped by is the prompt's length
    first_four = load_split(tiny_benchmark, "train", client=0).select(range(4))
    encoded = processor.encode_dataset(first_four)
    lengths = processor.collate(_rows(tiny_benchmark, 4))["attention_mask"].sum(dim=1).tolist()
    assert list(encoded["n_tokens"]) == lengths


def test_the_pixels_are_the_public_processor_s_and_a_page_is_cut_once(
    smolvlm_base: Path, tiny_benchmark: Path, tmp_path: Path
) -> None:
    from PIL import Image
    from transformers.models.idefics3.image_processing_pil_idefics3 import (
        Idefics3ImageProcessorPil,
    )

    processor = load_processor(smolvlm_base)
    rows = _rows(tiny_benchmark, 3)
    strip = tmp_path / "strip.png"  # a wide strip: 1 x 2 tiles + the global view
    with Image.open(rows[0]["image_path"]) as page:
        page.crop((0, 0, 600, 100)).save(strip)
    rows[1]["image_path"] = str(strip)
    batch = processor.collate(rows)
    public = Idefics3ImageProcessorPil(size={"longest_edge": 128},
                                       max_image_size={"longest_edge": 64},
                                       image_mean=[0.5] * 3, image_std=[0.5] * 3)  # fmt: skip
    expected = public(images=[[Image.open(row["image_path"]).convert("RGB")] for row in rows],
                      return_tensors="pt")  # fmt: skip
    assert batch["pixel_values"].shape == (3, 5, 3, 64, 64)
    assert torch.equal(batch["pixel_values"], expected["pixel_values"])
    assert torch.equal(batch["pixel_attention_mask"], expected["pixel_attention_mask"].bool())
    images = (batch["input_ids"] == processor.image_token_id).sum(dim=1).tolist()
    assert images == [5 * 16, 3 * 16, 5 * 16]
    kept = processor.page_tiles(rows[0]["image_path"])
    assert processor.page_tiles(rows[0]["image_path"]) is kept


def test_an_answer_does_not_depend_on_its_batch(smolvlm_base: Path, tiny_benchmark: Path) -> None:
    model, processor = load_model(smolvlm_base), load_processor(smolvlm_base)
    rows = _rows(tiny_benchmark, 3)
    rows[0]["question"] = rows[0]["question"] + " and in which currency is it written down?"
    with torch.inference_mode():
        together = model.generate(**processor.collate(rows), max_new_tokens=6)
        alone = [model.generate(**processor.collate([row]), max_new_tokens=6) for row in rows]
    assert together.shape == (3, 6)  # the answer alone, not the prompt
    for row, ids in enumerate(alone):
        assert together[row].tolist() == ids[0].tolist()


def test_a_training_step_is_quick_and_lowers_the_loss(
    smolvlm_base: Path, tiny_benchmark: Path
) -> None:
    processor = load_processor(smolvlm_base)
    batch = processor.collate(_rows(tiny_benchmark, 4), with_labels=True)
    torch.manual_seed(0)
    model = load_model(smolvlm_base).train()
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses, seconds = [], []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # CPU time of one thread: what a step costs, whatever the load
    try:
        for _ in range(6):
            start = time.process_time()
            loss = model(**batch).loss
            loss.backward()
            optimiser.step()
            optimiser.zero_grad()
            seconds.append(time.process_time() - start)
            losses.append(loss.item())
    finally:
        torch.set_num_threads(threads)
    assert losses[-1] < losses[0] - 0.5, losses
    assert statistics.median(seconds) < 0.5, seconds


def test_vt5_named_options_are_read_in_idefics3_s_modules(smolvlm_base: Path) -> None:
    model = load_model(smolvlm_base)
    modules = [name for name, _ in model.named_modules()]
    parameters = [name for name, _ in model.named_parameters()]
    for vt5_name, own in Idefics3.vt5_names.items():
        for name in own:
            if name.endswith("."):
                assert any(p.startswith(name) for p in parameters), (vt5_name, name)
            elif vt5_name == "language_backbone":
                assert name in modules
            else:
                assert any(m.startswith("model.text_model.") and m.endswith("." + name)
                           for m in modules), (vt5_name, name)  # fmt: skip

    lora = LoRA(targets=PRESETS["lora-nf4"]["lora_targets"])
    peft_model = lora.prepare(model, seed=0)
    assert lora.targets == ("q_proj", "k_proj", "v_proj", "o_proj",
                            "gate_proj", "up_proj", "down_proj")  # fmt: skip
    assert (lora.scope, lora.fully_trained) == ("model.text_model", ("model.connector.",))
    trained = [n for n, p in peft_model.named_parameters() if p.requires_grad]
    adapters = [n for n in trained if "lora_" in n]
    assert adapters and all(".text_model." in n for n in adapters)
    assert {n for n in trained if "lora_" not in n} == {
        n for n in trained if n.startswith("base_model.model.model.connector.")}  # fmt: skip
    assert {n.split(".lora_")[0].rsplit(".", 1)[-1] for n in adapters} == set(lora.targets)

    full = FullFineTuning()
    model = full.prepare(load_model(smolvlm_base), seed=0)
    assert full.frozen == ("model.vision_model.",)
    for name, parameter in model.named_parameters():
        assert parameter.requires_grad == (not name.startswith("model.vision_model.")), name


def test_idefics3_is_evaluated(smolvlm_base: Path, tiny_benchmark: Path) -> None:
    val = load_split(tiny_benchmark, "val").select(range(6))
    result = evaluate(load_model(smolvlm_base), load_processor(smolvlm_base), val, batch_size=4,
                      progress=False)  # fmt: skip
    assert len(result.predictions) == 6 and 0.0 <= result.anls <= 1.0


def _train(data: Path, base: Path, out: Path, *args: str) -> Path:
    result = CliRunner().invoke(train, ["--data", str(data), "--base", str(base), "--out", str(out),
                                        *TRAIN, *args], catch_exceptions=False)  # fmt: skip
    assert result.exit_code == 0, result.output
    return out


def test_idefics3_trains_lora_nf4_and_dp_lora_and_is_evaluated(
    smolvlm_base: Path, tiny_benchmark: Path, tmp_path: Path
) -> None:
    lora = _train(tiny_benchmark, smolvlm_base, tmp_path / "lora-nf4", "--preset", "lora-nf4",
                  "--family", "idefics3")  # fmt: skip
    assert json.loads((lora / "submission.json").read_text())["family"] == "idefics3"
    formats = {json.loads(line)["format"]
               for line in (lora / "communication_log.jsonl").read_text().splitlines()}  # fmt: skip
    assert formats == {"nf4"}
    dp = _train(tiny_benchmark, smolvlm_base, tmp_path / "dp-lora", "--preset", "dp-lora",
                "--epsilon", "8")  # fmt: skip
    assert json.loads((dp / "privacy.json").read_text())["epsilon"] <= 8
    val = load_split(tiny_benchmark, "val").select(range(4))
    for run in (lora, dp):
        model = load_model(run / "checkpoint")
        assert type(model).__name__ == "Idefics3ForDocumentVQA"
        result = evaluate(model, load_processor(run / "checkpoint"), val, batch_size=2,
                          progress=False)  # fmt: skip
        assert len(result.predictions) == 4
