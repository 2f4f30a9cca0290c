"""A tokenizer directory holding only `spiece.model` reads the same in every environment.

transformers' own converter parses `spiece.model` with a protobuf-7 generated module and fails
under the protobuf < 7 of `.venv-flower`; the kit reads such a directory through sentencepiece
(`benchmark.model.tokenizer.spiece_tokenizer`). These tests run in the main `.venv` (`make test`)
and in `.venv-flower` (`make test-flower`).
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
import sentencepiece as spm

from benchmark.model.tokenizer import (
    SPIECE_NAME,
    load_tokenizer,
    precompiled_charsmap,
    train_spiece_model,
)
from benchmark.shipped import BASE_MODEL_DIR

#: Texts whose pieces depend on the normaliser (NFKC ligatures, full-width forms, a Roman
#: numeral, repeated whitespace) as well as plain invoice questions.
TEXTS = [
    "What is the TOTAL due on invoice Nº 12-345?",
    "ﬁnal ＡＢＣ　１２３ café  naïve",
    "Ⅳ  \t tabs\nand a newline",
    "Acme GmbH, Street 17, 01.02.2025 4711.00 EUR",
]


def _spiece_only(tmp_path: Path, source: Path) -> Path:
    directory = tmp_path / "spiece-only"
    directory.mkdir()
    shutil.copyfile(source, directory / SPIECE_NAME)
    return directory


def test_the_shipped_spiece_model_alone_reads_as_its_tokenizer_json(tmp_path: Path) -> None:
    shipped = load_tokenizer(BASE_MODEL_DIR)
    alone = load_tokenizer(_spiece_only(tmp_path, BASE_MODEL_DIR / SPIECE_NAME))

    assert len(alone) == len(shipped) == 4000
    assert (alone.pad_token_id, alone.eos_token_id, alone.unk_token_id) == (0, 1, 2)
    assert sorted(alone.all_special_tokens) == sorted(shipped.all_special_tokens)
    for text in TEXTS:
        ids = alone(text).input_ids
        assert ids == shipped(text).input_ids, text
        assert alone.decode(ids, skip_special_tokens=True) == shipped.decode(
            ids, skip_special_tokens=True)


def test_a_freshly_trained_model_encodes_as_sentencepiece_does(tmp_path: Path) -> None:
    """The path of `random_tiny_model` (the Flower tests' base): train, then read the directory."""
    corpus = [text for text in TEXTS for _ in range(20)]
    path = train_spiece_model(corpus, tmp_path / "tok" / SPIECE_NAME, vocab_size=80,
                              hard_vocab_limit=False)
    tokenizer = load_tokenizer(path.parent)
    reference = spm.SentencePieceProcessor(model_file=str(path))

    assert len(tokenizer) == reference.get_piece_size()
    for text in TEXTS:
        assert tokenizer(text).input_ids == [*reference.encode(text), 1], text
    assert precompiled_charsmap(path.read_bytes())  # the default nmt_nfkc normaliser's map


def test_a_sentencepiece_model_without_t5_ids_is_refused(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(TEXTS * 20), model_writer=buffer,
                                   vocab_size=60, hard_vocab_limit=False, minloglevel=2)
    directory = tmp_path / "not-t5"
    directory.mkdir()
    (directory / SPIECE_NAME).write_bytes(buffer.getvalue())

    with pytest.raises(ValueError, match="not a T5 SentencePiece model.*train_spiece_model"):
        load_tokenizer(directory)
