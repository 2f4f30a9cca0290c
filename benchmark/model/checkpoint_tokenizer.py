"""The tokenizer files a processor reads from and writes to a checkpoint directory.

The kit's families (VT5's :class:`~benchmark.model.processing_vt5.VT5Processor` and the others'
processors) share the kit's own T5 SentencePiece tokenizer (``tokenizer.json`` and
``spiece.model``, :mod:`benchmark.model.tokenizer`) and keep their input settings in the model's
``config.json``; a processor built on :class:`CheckpointTokenizer` gets loading, saving and the
``spiece.model`` copy from here and states only ``from_config`` (and :meth:`read_tokenizer`
where its checkpoints may hold a tokenizer of their own, as SmolVLM's do).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Self

from benchmark.model.tokenizer import SPIECE_NAME, copy_spiece_model, load_tokenizer


class CheckpointTokenizer:
    """A processor whose tokenizer is a checkpoint directory's and whose settings are its
    config's."""

    _source_dir: Path | None = None

    @classmethod
    def from_config(cls, tokenizer: Any, config: Any) -> Self:
        """The processor of a tokenizer and a model configuration."""
        raise NotImplementedError

    @classmethod
    def from_pretrained(cls, directory: str | Path, config: Any) -> Self:
        """The processor of a checkpoint directory's tokenizer files and its configuration
        (read by its family, :meth:`~benchmark.model.families.base.ModelFamily.read_config`)."""
        processor = cls.from_config(cls.read_tokenizer(directory), config)
        processor._source_dir = Path(directory)
        return processor

    @classmethod
    def read_tokenizer(cls, directory: str | Path) -> Any:
        """The tokenizer of a checkpoint directory (the kit's T5 one, :func:`load_tokenizer`)."""
        return load_tokenizer(directory)

    def with_spiece_model(self, directory: str | Path) -> Self:
        """Remember the directory holding this tokenizer's `spiece.model`, copied on save."""
        if not (Path(directory) / SPIECE_NAME).is_file():
            raise FileNotFoundError(f"{Path(directory) / SPIECE_NAME}: not found")
        self._source_dir = Path(directory)
        return self

    def save_pretrained(self, directory: str | Path) -> None:
        """Write the tokenizer, added tokens included (the settings are in config.json)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.tokenizer.save_pretrained(str(directory))
        if self._source_dir is not None:
            copy_spiece_model(self._source_dir, directory)
