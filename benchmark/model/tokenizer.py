"""The T5 SentencePiece tokenizer: loading through transformers and training a small one.

A T5 `spiece.model` is a unigram SentencePiece model with `<pad>`=0, `</s>`=1, `<unk>`=2 and no
BOS; transformers appends `extra_ids` sentinel tokens `<extra_id_N>` after the pieces.
"""

from __future__ import annotations

import io
import shutil
from collections.abc import Iterable
from pathlib import Path

SPIECE_NAME = "spiece.model"


def load_tokenizer(directory: str | Path):
    """Load the T5 tokenizer of a checkpoint directory (local files only).

    Args:
        directory: holds `tokenizer.json` (+ `tokenizer_config.json`) or `spiece.model`.

    Returns:
        A transformers `T5Tokenizer`.

    Raises:
        FileNotFoundError: if the directory has no tokenizer files.
    """
    from transformers import T5Tokenizer

    directory = Path(directory)
    if not (directory / "tokenizer.json").is_file() and not (directory / SPIECE_NAME).is_file():
        raise FileNotFoundError(
            f"{directory}: no tokenizer (expected {SPIECE_NAME} or tokenizer.json); save the "
            "processor next to the model with `VT5Processor.save_pretrained`"
        )
    if (directory / "tokenizer.json").is_file():
        return T5Tokenizer.from_pretrained(str(directory), local_files_only=True)
    return T5Tokenizer.from_pretrained(str(directory), local_files_only=True, extra_ids=0)


def train_spiece_model(
    texts: Iterable[str],
    out_path: str | Path,
    *,
    vocab_size: int,
    character_coverage: float = 1.0,
    num_threads: int = 1,
    seed_sentencepiece_size: int = 100_000,
    hard_vocab_limit: bool = True,
) -> Path:
    """Train a T5-compatible unigram SentencePiece model and write it to `out_path`.

    Args:
        texts: training sentences (e.g. questions, answers and OCR lines of a corpus).
        out_path: where to write the `spiece.model` file.
        vocab_size: number of pieces, special tokens included.
        character_coverage: fraction of characters covered (1.0 keeps every character, so that
            digits and punctuation of document values can always be copied).
        num_threads: trainer threads.
        seed_sentencepiece_size: initial seed pieces of the unigram trainer.
        hard_vocab_limit: fail when the corpus cannot fill `vocab_size` pieces; when False the
            vocabulary may come out smaller.

    Returns:
        The written path.
    """
    import sentencepiece as spm

    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts),
        model_writer=buffer,
        vocab_size=vocab_size,
        model_type="unigram",
        pad_id=0,
        eos_id=1,
        unk_id=2,
        bos_id=-1,
        character_coverage=character_coverage,
        num_threads=num_threads,
        seed_sentencepiece_size=seed_sentencepiece_size,
        split_digits=False,
        hard_vocab_limit=hard_vocab_limit,
        max_sentence_length=1 << 16,  # whole OCR pages are longer than the 4192-byte default
        minloglevel=2,
    )
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(out_path.name + ".tmp")
    tmp.write_bytes(buffer.getvalue())
    tmp.replace(out_path)
    return out_path


def copy_spiece_model(source_dir: str | Path, target_dir: str | Path) -> None:
    """Copy `spiece.model` between directories when the source has one."""
    source = Path(source_dir) / SPIECE_NAME
    if source.is_file() and source.resolve() != (Path(target_dir) / SPIECE_NAME).resolve():
        shutil.copyfile(source, Path(target_dir) / SPIECE_NAME)
