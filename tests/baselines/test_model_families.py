"""Model families: the kit trains and evaluates any family behind one seam.

Pix2Struct (OCR-free, the question drawn above the page) goes from ``pflkit model init`` through
``pflkit train`` (LoRA + NF4 and DP-LoRA) to ``benchmark.evaluation``; VT5-named options are
read in its own module names; what is bound to VT5 (federated self-pretraining) refuses it by
name. A toy fourth family registered by this test alone (a text-only T5 reading the question
and the OCR words, one module written to a temporary folder) trains and evaluates with no
change to the kit.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file, save_file

import benchmark.model.families as families
from baselines.cli import train
from baselines.methods.full import FullFineTuning
from baselines.methods.lora import LoRA
from benchmark.data import load_split
from benchmark.evaluation import evaluate
from benchmark.model import load_model, load_processor, read_checkpoint_config
from benchmark.model.families import UnknownFamily, family_named
from benchmark.model.family_checkpoint import validate_checkpoint_dir
from benchmark.model.random_init import init_checkpoint
from benchmark.model.safetensors_header import CheckpointError

TRAIN = ("--rounds", "1", "--local-epochs", "1", "--val-limit", "0", "--threads", "1",
         "--no-progress", "--clients-per-round", "1")  # fmt: skip


@pytest.fixture(scope="module")
def pix2struct_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random tiny Pix2Struct with the shipped tokenizer (`pflkit model init`)."""
    return init_checkpoint("tiny", tmp_path_factory.mktemp("p2s") / "base", family="pix2struct")


def _train(data: Path, base: Path, out: Path, *args: str) -> Path:
    result = CliRunner().invoke(train, ["--data", str(data), "--base", str(base), "--out", str(out),
                                        *TRAIN, *args], catch_exceptions=False)  # fmt: skip
    assert result.exit_code == 0, result.output
    return out


def test_the_families_are_found_by_model_type_and_an_unknown_one_is_named() -> None:
    assert {"vt5", "pix2struct"} <= set(families.FAMILIES)
    assert family_named("pix2struct").title == "Pix2Struct"
    with pytest.raises(UnknownFamily, match=r"unknown model family 'donut'; the kit knows .*vt5"):
        family_named("donut")


def test_a_pix2struct_checkpoint_is_read_checked_and_refused_when_wrong(
    pix2struct_base: Path, tmp_path: Path
) -> None:
    config = validate_checkpoint_dir(pix2struct_base)
    assert (config.model_type, config.max_patches, config.max_answer_tokens) == ("pix2struct", 256, 20)
    model, processor = load_model(pix2struct_base), load_processor(pix2struct_base)
    assert type(model).__name__ == "Pix2StructForConditionalGeneration"
    assert len(processor.tokenizer) == len(load_processor("base").tokenizer)
    broken = tmp_path / "broken"
    broken.mkdir()
    for item in pix2struct_base.iterdir():
        (broken / item.name).write_bytes(item.read_bytes())
    tensors = load_file(broken / "model.safetensors")
    name = next(n for n in tensors if n.endswith("query.weight"))
    tensors[name] = torch.zeros(3, 3)
    save_file(tensors, broken / "model.safetensors")
    with pytest.raises(CheckpointError, match=name.replace(".", r"\.")):
        load_model(broken)
    raw = json.loads((broken / "config.json").read_text())
    (broken / "config.json").write_text(json.dumps({**raw, "max_patches": 0}))
    with pytest.raises(CheckpointError, match="invalid Pix2Struct configuration .*max_patches"):
        read_checkpoint_config(broken)


def test_the_question_is_drawn_above_the_page_and_training_lowers_the_loss(
    pix2struct_base: Path, tiny_benchmark: Path
) -> None:
    processor = load_processor(pix2struct_base)
    row = load_split(tiny_benchmark, "train", client=0)[0]
    page = processor.load_image(row["image_path"])
    drawn = processor.render(row["image_path"], row["question"])
    assert drawn.width >= page.width and drawn.height > page.height * drawn.width / page.width
    assert drawn.getpixel((drawn.width // 2, drawn.height - 1)) == page.resize(
        (drawn.width, round(page.height * drawn.width / page.width))).getpixel(
        (drawn.width // 2, round(page.height * drawn.width / page.width) - 1))  # fmt: skip
    rows = [dict(r) for r in load_split(tiny_benchmark, "train", client=0).select(range(4))]
    batch = processor.collate(rows, with_labels=True)
    assert batch["flattened_patches"].shape[:2] == (4, 256)
    assert (batch["labels"][:, 0] != -100).all()
    torch.manual_seed(0)
    model = load_model(pix2struct_base).train()
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(6):
        loss = model(**batch).loss
        losses.append(loss.item())
        loss.backward()
        optimiser.step()
        optimiser.zero_grad()
    assert losses[-1] < losses[0] - 0.5, losses


def test_vt5_named_options_are_read_in_the_family_s_own_modules(pix2struct_base: Path) -> None:
    lora = LoRA(targets=("q", "k", "v", "o", "wi", "wo"))
    peft_model = lora.prepare(load_model(pix2struct_base), seed=0)
    assert lora.targets == ("query", "key", "value", "output", "wi_0", "wi_1", "wo")
    assert (lora.scope, lora.fully_trained) == ("", ("encoder.embeddings.patch_projection.",))
    trained = [n for n, p in peft_model.named_parameters() if p.requires_grad]
    adapted = {n.split(".lora_")[0].rsplit(".", 1)[-1] for n in trained if "lora_" in n}
    assert adapted == {"query", "key", "value", "output", "wi_0", "wi_1", "wo"}
    assert {n for n in trained if "lora_" not in n} == {
        "base_model.model.encoder.embeddings.patch_projection.weight",
        "base_model.model.encoder.embeddings.patch_projection.bias"}  # fmt: skip
    full = FullFineTuning()
    model = full.prepare(load_model(pix2struct_base), seed=0)
    assert full.frozen == () and all(p.requires_grad for p in model.parameters())


def test_pix2struct_trains_lora_nf4_and_dp_lora_and_is_evaluated(
    pix2struct_base: Path, tiny_benchmark: Path, tmp_path: Path
) -> None:
    lora = _train(tiny_benchmark, pix2struct_base, tmp_path / "lora-nf4", "--preset", "lora-nf4",
                  "--family", "pix2struct")  # fmt: skip
    submission = json.loads((lora / "submission.json").read_text())
    assert submission["family"] == "pix2struct"
    formats = {json.loads(line)["format"]
               for line in (lora / "communication_log.jsonl").read_text().splitlines()}  # fmt: skip
    assert formats == {"nf4"}
    dp = _train(tiny_benchmark, pix2struct_base, tmp_path / "dp-lora", "--preset", "dp-lora",
                "--epsilon", "8")  # fmt: skip
    privacy = json.loads((dp / "privacy.json").read_text())
    assert privacy["epsilon"] <= 8
    val = load_split(tiny_benchmark, "val").select(range(6))
    for run in (lora, dp):
        model = load_model(run / "checkpoint")
        assert model.config.model_type == "pix2struct"
        result = evaluate(model, load_processor(run / "checkpoint"), val, batch_size=3,
                          progress=False)  # fmt: skip
        assert len(result.predictions) == 6 and 0.0 <= result.anls <= 1.0


def test_what_is_bound_to_vt5_refuses_another_family_by_name(
    pix2struct_base: Path, tiny_benchmark: Path, tmp_path: Path
) -> None:
    result = CliRunner().invoke(train, ["--data", str(tiny_benchmark), "--out", str(tmp_path / "a"),
                                        "--preset", "lora", "--family", "pix2struct"])  # fmt: skip
    assert result.exit_code == 2
    assert "--family pix2struct but --base base is a VT5 checkpoint" in result.output
    assert "pflkit model init --family pix2struct --shape tiny --out DIR" in result.output
    result = CliRunner().invoke(train, ["--data", str(tiny_benchmark), "--out", str(tmp_path / "b"),
                                        "--base", str(pix2struct_base), "--preset", "fsp-fedavg",
                                        *TRAIN])  # fmt: skip
    assert result.exit_code == 1
    assert "federated self-pretraining (--fsp-rounds) is written for VT5" in result.output
    assert "Pix2Struct checkpoint" in result.output
    assert not (tmp_path / "b").exists() or not any((tmp_path / "b").iterdir())


#: the whole of a family: what a new family's module holds (a text-only T5 reading the
#: question and the page's OCR words; no image).
TOY_FAMILY = '''
from pathlib import Path

import torch
from transformers import T5Config, T5ForConditionalGeneration

from benchmark.model.families.base import ModelFamily
from benchmark.model.tokenizer import copy_spiece_model, load_tokenizer


class ToyConfig(T5Config):
    model_type = "toy-t5"


class ToyModel(T5ForConditionalGeneration):
    config_class = ToyConfig


class ToyProcessor:
    input_columns = ("question", "ocr_tokens")
    page_features = False
    use_visual = False
    max_answer_tokens = 8

    def __init__(self, tokenizer, source=None):
        self.tokenizer, self._source_dir = tokenizer, source

    def save_pretrained(self, directory):
        self.tokenizer.save_pretrained(str(directory))
        copy_spiece_model(self._source_dir, directory)

    def encode_dataset(self, dataset, *, cache_dir=None, progress=True):
        if "n_tokens" in dataset.column_names:
            return dataset
        return dataset.add_column("n_tokens", [1] * len(dataset))

    def collate(self, features, *, with_labels=False, with_images=None):
        texts = [f"question: {row['question']} context: {' '.join(row['ocr_tokens'])}"
                 for row in features]
        batch = dict(self.tokenizer(texts, padding=True, truncation=True, max_length=128,
                                    return_tensors="pt"))
        if with_labels:
            labels = self.tokenizer([row["answers"][0] for row in features], padding=True,
                                    return_tensors="pt")["input_ids"]
            batch["labels"] = labels.masked_fill(labels == self.tokenizer.pad_token_id, -100)
        return batch

    def load_image(self, image):
        raise ValueError("the toy family reads no image")

    def decode(self, token_ids):
        return [t.strip() for t in self.tokenizer.batch_decode(token_ids, skip_special_tokens=True)]


class ToyT5(ModelFamily):
    name = "toy-t5"
    title = "Toy T5"
    vt5_names = {"language_backbone": ("",), "spatial_embedding.": (),
                 "visual_embedding.visual_emb_matcher.": (), "visual_embedding.image_model.": ()}

    @classmethod
    def config_from_dict(cls, raw):
        return ToyConfig.from_dict(raw)

    @classmethod
    def model_class(cls):
        return ToyModel

    @classmethod
    def load_processor(cls, directory):
        return ToyProcessor(load_tokenizer(directory), Path(directory))

    @classmethod
    def random_model(cls, shape, tokenizer_dir):
        tokenizer = load_tokenizer(tokenizer_dir)
        config = ToyConfig(vocab_size=len(tokenizer), d_model=32, d_kv=8, d_ff=64, num_layers=1,
                           num_heads=2, decoder_start_token_id=tokenizer.pad_token_id)
        return ToyModel(config).eval(), ToyProcessor(tokenizer, Path(tokenizer_dir))
'''
MODULE = "toy_family"


@pytest.fixture
def toy_family(tmp_path: Path) -> Iterator[None]:
    """``benchmark/model/families/`` as if it held :data:`TOY_FAMILY` as one more module."""
    folder = tmp_path / "families"
    folder.mkdir()
    (folder / f"{MODULE}.py").write_text(TOY_FAMILY)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(families, "__path__", [*families.__path__, str(folder)])
        try:
            patch.setattr(families, "FAMILIES", families.discover_families())
            yield
        finally:
            sys.modules.pop(f"{families.__name__}.{MODULE}", None)
            vars(families).pop(MODULE, None)


def test_a_fourth_family_in_one_file_trains_and_is_evaluated(
    toy_family: None, tiny_benchmark: Path, tmp_path: Path
) -> None:
    assert "toy-t5" in families.FAMILIES
    base = init_checkpoint("tiny", tmp_path / "toy-base", family="toy-t5")
    run = _train(tiny_benchmark, base, tmp_path / "run", "--preset", "lora-nf4",
                 "--family", "toy-t5")  # fmt: skip
    model = load_model(run / "checkpoint")
    assert type(model).__name__ == "ToyModel"
    assert json.loads((run / "submission.json").read_text())["family"] == "toy-t5"
    val = load_split(tiny_benchmark, "val").select(range(4))
    result = evaluate(model, load_processor(run / "checkpoint"), val, batch_size=2, progress=False)
    assert len(result.predictions) == 4


def test_a_hub_layout_pix2struct_converts_and_answers_the_same(
    pix2struct_base: Path, tiny_benchmark: Path, tmp_path: Path
) -> None:
    from transformers import Pix2StructConfig, Pix2StructForConditionalGeneration

    from pflkit.cli import main

    kit = load_model(pix2struct_base)
    hub = tmp_path / "hub"
    raw = {k: v for k, v in kit.config.to_dict().items()
           if k not in ("max_patches", "max_answer_tokens")}  # fmt: skip
    hub_model = Pix2StructForConditionalGeneration(Pix2StructConfig.from_dict(raw))
    hub_model.load_state_dict(kit.state_dict())
    hub_model.half().save_pretrained(str(hub))  # the hub's weights need not be fp32
    (hub / "preprocessor_config.json").write_text(json.dumps({"max_patches": 256, "is_vqa": True}))
    for name in ("spiece.model", "tokenizer.json", "tokenizer_config.json"):
        (hub / name).write_bytes((pix2struct_base / name).read_bytes())
    result = CliRunner().invoke(main, ["model", "convert", str(hub), str(tmp_path / "kit"),
                                       "--family", "pix2struct"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "max_patches: 256 (preprocessor_config.json)" in result.output
    assert "cast to float32" in result.output
    converted = load_model(tmp_path / "kit")
    val = load_split(tiny_benchmark, "val").select(range(3))
    ours = evaluate(converted, load_processor(tmp_path / "kit"), val, progress=False)
    theirs = evaluate(kit.half().float(), load_processor(pix2struct_base), val, progress=False)
    assert [p.prediction for p in ours.predictions] == [p.prediction for p in theirs.predictions]
    again = CliRunner().invoke(main, ["model", "convert", str(hub), str(tmp_path / "kit"),
                                      "--family", "pix2struct"])  # fmt: skip
    assert again.exit_code == 1 and "already exists" in again.output
    (hub / "config.json").write_text(json.dumps({**raw, "model_type": "donut"}))
    wrong = CliRunner().invoke(main, ["model", "convert", str(hub), str(tmp_path / "other"),
                                      "--family", "pix2struct"])  # fmt: skip
    assert wrong.exit_code == 1 and "model_type is 'donut', not 'pix2struct'" in wrong.output
    assert not (tmp_path / "other").exists()
