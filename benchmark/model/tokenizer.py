"""The T5 SentencePiece tokenizer: loading through transformers and training a small one.

A family whose public checkpoint has a tokenizer of its own (SmolVLM's byte-level BPE) reads
whichever one its checkpoint directory holds (:func:`load_checkpoint_tokenizer`).

A T5 `spiece.model` is a unigram SentencePiece model with `<pad>`=0, `</s>`=1, `<unk>`=2 and no
BOS; transformers appends `extra_ids` sentinel tokens `<extra_id_N>` after the pieces.

A directory holding only `spiece.model` is read through `sentencepiece` itself
(:func:`spiece_tokenizer`), not through transformers' converter: that one parses the model with
the `sentencepiece_model_pb2` module of the sentencepiece wheel, generated for protobuf 7, so it
fails under the protobuf < 7 that flwr pins (`.venv-flower`) and transformers then falls back to
a tiktoken reader ("tiktoken is required to read a tiktoken file").
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
    return spiece_tokenizer(directory / SPIECE_NAME)


#: `tokenizer_config.json` classes of the kit's own T5 tokenizer (slow and fast names).
T5_TOKENIZER_CLASSES = ("T5Tokenizer", "T5TokenizerFast")
TOKENIZER_JSON_NAME = "tokenizer.json"
TOKENIZER_CONFIG_NAME = "tokenizer_config.json"


def load_checkpoint_tokenizer(directory: str | Path):
    """The tokenizer a checkpoint directory holds, the kit's T5 one or a model's own.

    The kit's T5 SentencePiece tokenizer (:func:`load_tokenizer`) where the directory holds
    `spiece.model` or its `tokenizer_config.json` names a T5 tokenizer class; otherwise its
    `tokenizer.json` as transformers' `PreTrainedTokenizerFast` (e.g. SmolVLM's byte-level BPE),
    with the special tokens of `tokenizer_config.json` (and `special_tokens_map.json`). Only
    those JSON files are read: no remote code, no pickle, whatever class the config names.

    Args:
        directory: a checkpoint directory (the kit's, or a hub layout being converted).

    Returns:
        A transformers tokenizer.

    Raises:
        FileNotFoundError: if the directory has no tokenizer files.
        ValueError: if its `tokenizer.json` cannot be read as a tokenizer.
    """
    directory = Path(directory)
    if (directory / SPIECE_NAME).is_file() or _names_t5_class(directory):
        return load_tokenizer(directory)
    if not (directory / TOKENIZER_JSON_NAME).is_file():
        raise FileNotFoundError(
            f"{directory}: no tokenizer (expected {SPIECE_NAME} or {TOKENIZER_JSON_NAME})"
        )
    from transformers import PreTrainedTokenizerFast

    try:
        return PreTrainedTokenizerFast.from_pretrained(str(directory), local_files_only=True)
    except (OSError, ValueError, TypeError, KeyError) as error:
        raise ValueError(
            f"{directory / TOKENIZER_JSON_NAME}: not a readable tokenizer "
            f"({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})"
        ) from None


def _names_t5_class(directory: Path) -> bool:
    """Whether the directory's `tokenizer_config.json` names the kit's T5 tokenizer class."""
    path = directory / TOKENIZER_CONFIG_NAME
    if not path.is_file():
        return False
    from benchmark.model.checkpoint import MAX_CONFIG_BYTES, read_checkpoint_json

    return read_checkpoint_json(path, max_bytes=16 * MAX_CONFIG_BYTES).get(
        "tokenizer_class") in T5_TOKENIZER_CLASSES


#: T5's special pieces and their ids in `spiece.model`.
T5_SPECIAL_IDS = {"<pad>": 0, "</s>": 1, "<unk>": 2}


def spiece_tokenizer(path: str | Path):
    """A `T5Tokenizer` (without sentinels) built from a `spiece.model` read by sentencepiece.

    The pieces and scores come from `sentencepiece.SentencePieceProcessor` and the normaliser's
    precompiled character map from the model's bytes (:func:`precompiled_charsmap`), so neither
    protobuf's version nor transformers' converter is involved; the tokenizer is the one
    `T5Tokenizer.from_pretrained(..., extra_ids=0)` builds where that converter works.

    Args:
        path: the `spiece.model` file.

    Returns:
        A transformers `T5Tokenizer`.

    Raises:
        ValueError: the model is not a T5 unigram model (`<pad>`=0, `</s>`=1, `<unk>`=2).
    """
    import sentencepiece as spm
    from transformers import AddedToken, T5Tokenizer

    model = Path(path).read_bytes()
    processor = spm.SentencePieceProcessor(model_proto=model)
    layout = {piece: processor.piece_to_id(piece) for piece in T5_SPECIAL_IDS}
    if layout != T5_SPECIAL_IDS:
        raise ValueError(
            f"{path}: not a T5 SentencePiece model (special pieces at {layout}, expected "
            f"{T5_SPECIAL_IDS}); train it with benchmark.model.tokenizer.train_spiece_model"
        )
    size = processor.get_piece_size()
    vocab = [(processor.id_to_piece(i), processor.get_score(i)) for i in range(size)]
    control = [AddedToken(processor.id_to_piece(i), normalized=False, special=True)
               for i in range(size) if processor.is_control(i)]  # fmt: skip
    return T5Tokenizer(vocab=vocab, _spm_precompiled_charsmap=precompiled_charsmap(model),
                       extra_ids=0, additional_special_tokens=control)  # fmt: skip


def precompiled_charsmap(model: bytes) -> bytes | None:
    """The normaliser's character map of a serialised SentencePiece `ModelProto`.

    `ModelProto.normalizer_spec` is field 3 and `NormalizerSpec.precompiled_charsmap` field 2;
    the protobuf wire format is read directly (no generated module, so any protobuf version).

    Args:
        model: the bytes of a `spiece.model` file.

    Returns:
        The map's bytes, or None when the model has none (identity normalisation).
    """
    spec = _length_delimited_field(model, 3)
    charsmap = None if spec is None else _length_delimited_field(spec, 2)
    return charsmap or None


def _length_delimited_field(message: bytes, number: int) -> bytes | None:
    """The last value of a bytes/message field of a serialised protobuf message.

    Raises:
        ValueError: the bytes are not a protobuf message.
    """
    found, position = None, 0
    while position < len(message):
        key, position = _varint(message, position)
        field, wire_type = key >> 3, key & 7
        if wire_type == 0:
            _, position = _varint(message, position)
        elif wire_type == 1:
            position += 8
        elif wire_type == 5:
            position += 4
        elif wire_type == 2:
            length, position = _varint(message, position)
            if field == number:
                found = message[position:position + length]
            position += length
        else:
            raise ValueError(f"not a SentencePiece model: wire type {wire_type} at byte {position}")
    if position != len(message):
        raise ValueError("not a SentencePiece model: a field runs past the end of the file")
    return found


def _varint(data: bytes, position: int) -> tuple[int, int]:
    """Decode a protobuf varint at ``position``; returns ``(value, next position)``.

    Raises:
        ValueError: the data ends inside the varint.
    """
    value, shift = 0, 0
    while True:
        if position >= len(data):
            raise ValueError("not a SentencePiece model: the file ends inside a number")
        byte = data[position]
        value |= (byte & 0x7F) << shift
        position += 1
        if not byte & 0x80:
            return value, position
        shift += 7


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
