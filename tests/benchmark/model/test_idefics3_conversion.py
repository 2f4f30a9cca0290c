"""SmolVLM's hub layout becomes a kit checkpoint that keeps its own byte-level BPE tokenizer.

The hub is unreachable here, so the "hub" directory is written by ``save_pretrained`` of a
random tiny ``Idefics3ForConditionalGeneration`` in bfloat16 (as SmolVLM-256M-Instruct's weights
are), with a small byte-level BPE tokenizer trained here with the ``tokenizers`` library whose
vocabulary holds the chat template's tokens (in another order than the kit adds them, so they
must be looked up by their text), and the hub's ``preprocessor_config.json`` and
``processor_config.json``. ``pflkit model convert --family idefics3`` turns it into a kit
checkpoint whose processor reads that tokenizer and whose answers are the hub model's; a foreign
``model_type`` or settings the kit cannot reproduce are refused and leave nothing behind.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from benchmark.data import load_split
from benchmark.evaluation import evaluate
from benchmark.model import load_model, load_processor
from benchmark.model.families.idefics3 import (
    MAX_ANSWER_TOKENS,
    TINY_SCALE_FACTOR,
    TINY_TEXT,
    TINY_VISION,
)
from benchmark.model.families.idefics3.processing import CHAT_TOKENS, END_OF_UTTERANCE, IMAGE_TOKEN
from benchmark.model.family_checkpoint import validate_checkpoint_dir
from benchmark.model.loading import save_checkpoint
from pflkit.cli import main

TEXTS = ("What is the total amount due?", "The invoice number is 12345.",
         "User: Assistant: date name address phone total tax", "Paid on 01/02/2023 by ACME Ltd.")  # fmt: skip
#: The hub tokenizer's own special tokens (SmolLM2's), before the template's.
OWN_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


def _byte_level_tokenizer(directory: Path):
    """A small byte-level BPE tokenizer with the template's tokens, saved as the hub saves one."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=list(OWN_SPECIALS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)  # fmt: skip
    bpe.train_from_iterator(TEXTS * 4, trainer)
    template = [token for token in reversed(CHAT_TOKENS) if token not in OWN_SPECIALS]
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, bos_token="<|im_start|>", eos_token=END_OF_UTTERANCE,
        pad_token="<|im_end|>", unk_token="<|endoftext|>", additional_special_tokens=template,
    )  # fmt: skip
    tokenizer.save_pretrained(str(directory))
    path = directory / "tokenizer_config.json"
    settings = json.loads(path.read_text())
    path.write_text(json.dumps({**settings, "tokenizer_class": "GPT2Tokenizer"}))  # the hub's
    return tokenizer


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, torch.nn.Module]:
    """A SmolVLM-layout directory and its model as transformers reads it (in fp32)."""
    from transformers import Idefics3Config, Idefics3ForConditionalGeneration

    directory = tmp_path_factory.mktemp("smolvlm_hub") / "hub"
    tokenizer = _byte_level_tokenizer(directory)
    ids = tokenizer.get_vocab()
    text = {**TINY_TEXT, "vocab_size": len(tokenizer) + 7, "bos_token_id": ids["<|im_start|>"],
            "eos_token_id": ids["<|im_end|>"], "pad_token_id": ids["<|im_end|>"]}  # fmt: skip
    config = Idefics3Config(text_config=text, vision_config=dict(TINY_VISION),
                            scale_factor=TINY_SCALE_FACTOR, image_token_id=ids[IMAGE_TOKEN],
                            tie_word_embeddings=False)  # fmt: skip
    torch.manual_seed(49)
    model = Idefics3ForConditionalGeneration(config).eval().to(torch.bfloat16)
    model.save_pretrained(str(directory))
    (directory / "preprocessor_config.json").write_text(json.dumps({
        "do_image_splitting": True, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
        "image_processor_type": "Idefics3ImageProcessor", "max_image_size": {"longest_edge": 64},
        "resample": 1, "rescale_factor": 1 / 255, "size": {"longest_edge": 128},
    }))  # fmt: skip
    (directory / "processor_config.json").write_text(
        json.dumps({"image_seq_len": 16, "processor_class": "Idefics3Processor"}))
    # as the hub's model is read (bfloat16 weights in fp32; a bfloat16 copy cast back would also
    # have rounded the rotary embedding's frequencies, which loading computes afresh)
    reference = Idefics3ForConditionalGeneration.from_pretrained(
        str(directory), local_files_only=True, dtype=torch.float32)
    return directory, reference.eval()


def _convert(source: Path, target: Path):
    return CliRunner().invoke(main, ["model", "convert", str(source), str(target),
                                     "--family", "idefics3"])  # fmt: skip


def test_a_hub_layout_smolvlm_converts_keeps_its_tokenizer_and_answers_the_same(
    hub: tuple[Path, torch.nn.Module], tiny_benchmark: Path, tmp_path: Path
) -> None:
    source, reference = hub
    result = _convert(source, tmp_path / "kit")
    assert result.exit_code == 0, result.output
    assert "cast to float32" in result.output
    assert "image_longest_edge: 128 (preprocessor_config.json); 64-pixel tiles, 16 image" \
        in " ".join(result.output.split())  # fmt: skip
    assert "TokenizersBackend of tokenizer.json" in result.output or \
        "PreTrainedTokenizerFast of tokenizer.json" in result.output  # fmt: skip
    config = validate_checkpoint_dir(tmp_path / "kit")
    assert (config.image_longest_edge, config.max_answer_tokens) == (128, MAX_ANSWER_TOKENS)
    assert not (tmp_path / "kit" / "spiece.model").exists()
    hub_vocab = json.loads((source / "tokenizer.json").read_text())["model"]["vocab"]

    model, processor = load_model(tmp_path / "kit"), load_processor(tmp_path / "kit")
    vocab = processor.tokenizer.get_vocab()
    assert "T5" not in type(processor.tokenizer).__name__
    assert all(vocab[piece] == index for piece, index in hub_vocab.items())
    assert processor.image_token_id == config.image_token_id == vocab[IMAGE_TOKEN]
    assert processor.end_of_utterance_id == config.text_config.eos_token_id == \
        vocab[END_OF_UTTERANCE]  # fmt: skip
    assert processor.pad_token_id == vocab["<|im_end|>"]
    assert processor.decode([processor._text_ids(" total 12345")]) == ["total 12345"]

    val = load_split(tiny_benchmark, "val").select(range(3))
    rows = [dict(row) for row in val]
    batch = processor.collate(rows)
    with torch.no_grad():
        ours = model.generate(**batch)
        theirs = reference.generate(**batch, max_new_tokens=MAX_ANSWER_TOKENS, do_sample=False,
                                    eos_token_id=processor.end_of_utterance_id,
                                    pad_token_id=processor.pad_token_id)  # fmt: skip
        labelled = processor.collate(rows, with_labels=True)
        assert torch.equal(model(**labelled).logits, reference(**labelled).logits)
    assert torch.equal(ours, theirs[:, batch["input_ids"].shape[1]:])
    scored = evaluate(model, processor, val, progress=False)
    assert [p.prediction for p in scored.predictions] == processor.decode(ours)

    copy = save_checkpoint(model, processor, tmp_path / "copy")  # a trained one is saved so
    assert load_processor(copy).tokenizer.get_vocab() == vocab


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"config.json": {"model_type": "llava"}}, "model_type is 'llava', not 'idefics3'"),
        ({"config.json": {"image_token_id": 3}}, "image_token_id is 3"),
        ({"preprocessor_config.json": {"image_mean": [0.48, 0.46, 0.41]}}, "image_mean is"),
        ({"preprocessor_config.json": {"max_image_size": {"longest_edge": 32}}},
         "32-pixel tiles but the vision encoder reads 64-pixel ones"),
        ({"processor_config.json": {"image_seq_len": 64}}, "image_seq_len is 64"),
        ({"tokenizer_config.json": {"pad_token": None}}, "no padding token"),
    ],
)
def test_a_foreign_or_unreproducible_hub_checkpoint_is_refused_and_nothing_is_left(
    hub: tuple[Path, torch.nn.Module], tmp_path: Path, change: dict, message: str
) -> None:
    source = tmp_path / "hub"
    shutil.copytree(hub[0], source)
    for name, settings in change.items():
        path = source / name
        path.write_text(json.dumps({**json.loads(path.read_text()), **settings}))
    result = _convert(source, tmp_path / "kit")
    assert result.exit_code == 1 and message in " ".join(result.output.split()), result.output
    assert sorted(path.name for path in tmp_path.iterdir()) == ["hub"]


def test_a_tokenizer_without_the_template_s_tokens_is_refused(
    hub: tuple[Path, torch.nn.Module], tmp_path: Path
) -> None:
    source = tmp_path / "hub"
    shutil.copytree(hub[0], source)
    from tokenizers import Tokenizer

    bpe = Tokenizer.from_file(str(source / "tokenizer.json"))
    plain = json.loads(bpe.to_str())
    plain["added_tokens"] = [token for token in plain["added_tokens"]
                             if token["content"] in ("<|endoftext|>", "<|im_start|>", "<|im_end|>")]
    (source / "tokenizer.json").write_text(json.dumps(plain))
    settings = json.loads((source / "tokenizer_config.json").read_text())
    settings.pop("added_tokens_decoder", None)
    settings.pop("extra_special_tokens", None)
    settings.pop("additional_special_tokens", None)
    settings["eos_token"] = "<|im_end|>"
    (source / "tokenizer_config.json").write_text(json.dumps(settings))
    result = _convert(source, tmp_path / "kit")
    assert result.exit_code == 1 and "the tokenizer lacks <fake_token_around_image>" in \
        result.output, result.output  # fmt: skip
    assert not (tmp_path / "kit").exists()


def test_without_a_preprocessor_config_the_public_checkpoint_s_page_size_is_used_and_said(
    tmp_path: Path,
) -> None:
    from benchmark.model.families.idefics3 import BASE_LONGEST_EDGE
    from benchmark.model.families.idefics3.conversion import _image_settings

    assert _image_settings(tmp_path) == (
        BASE_LONGEST_EDGE, None, "no preprocessor_config.json: the public checkpoint's")
    (tmp_path / "preprocessor_config.json").write_text(json.dumps({"resample": 1}))
    assert _image_settings(tmp_path)[0] == BASE_LONGEST_EDGE
    assert "the public checkpoint's" in _image_settings(tmp_path)[2]
