"""What a document-model family declares: the one seam between the kit and a model architecture.

The kit's engine, methods, DP, accountant, wire formats, evaluator, audit and leaderboard do not
care which model they carry; they reach a model only through its family, a subclass of
:class:`ModelFamily` in one module (or package) of :mod:`benchmark.model.families`, found by
scanning that package. A family says how its checkpoint directories are read, built and written,
the processor that turns a PFL-DocVQA record into tensors, and the defaults the methods need
(LoRA's targets, the parameters frozen in full fine-tuning).

The processor a family returns follows :class:`DocumentProcessor`; its model is a transformers
``PreTrainedModel`` whose ``forward(**batch)`` returns the loss when the batch has ``labels``
and whose ``generate(**batch, max_new_tokens=...)`` returns answer ids the processor decodes.

Nothing here imports torch or transformers: the scoring service's upload checks and every
command's ``--help`` read families without them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

from benchmark.model.checkpoint import read_config_object
from benchmark.model.safetensors_header import CheckpointError


@runtime_checkable
class DocumentProcessor(Protocol):
    """Turns PFL-DocVQA records into a family's model inputs, and answer ids into text.

    Attributes:
        input_columns: the encoded dataset's columns that :meth:`collate` reads (besides
            ``image_path`` and, with labels, ``answers``).
        page_features: the model computes one page's visual features once for all its questions
            (``model.embed_images`` and ``generate(visual_embeds=...)``, VT5); ``False``: the
            question is part of the image input, every question is encoded whole.
        use_visual: whether the model reads the page image at all.
        max_answer_tokens: bound on generated answer tokens.
    """

    input_columns: tuple[str, ...]
    page_features: bool
    use_visual: bool
    max_answer_tokens: int

    def save_pretrained(self, directory: str | Path) -> None:
        """Write the tokenizer and the input settings beside a checkpoint's weights."""

    def encode_dataset(self, dataset: Any, *, cache_dir: str | Path | None = None,
                       progress: bool = True) -> Any:
        """The ``load_split`` dataset with the :attr:`input_columns` and ``n_tokens`` added."""

    def collate(self, features: Sequence[dict[str, Any]], *, with_labels: bool = False,
                with_images: bool | None = None) -> dict[str, Any]:
        """A batch of model inputs (tensors) of encoded rows; ``labels`` (-100 on padding)
        from each row's first answer on request."""

    def load_image(self, image: Any) -> Any:
        """A page image (path or PIL image) as the family reads it: the normalised tensor of
        the image encoder where pages have features of their own (VT5), else the RGB image
        that :meth:`collate` turns into inputs with its question."""

    def decode(self, token_ids: Any) -> list[str]:
        """Answer strings of generated ids."""


class ModelFamily:
    """A document-model architecture the kit can train, score and rank.

    A family is a class (never instantiated) with the attributes below and the four class
    methods; :mod:`benchmark.model.families` finds it by :attr:`name`, which is also the
    ``model_type`` of its checkpoints' ``config.json``.

    Attributes:
        name: ``model_type`` of the family's ``config.json`` (``vt5``, ``pix2struct``).
        title: the name people know it by, for pages and messages.
        shapes: the shapes ``pflkit model init`` writes: ``tiny`` (the kit's CPU shape) and
            ``base`` (the public checkpoint's), plus any alias the family keeps.
        public_checkpoint: the hub checkpoint whose real shape ``base`` is.
        decoder_only: the labels are the whole sequence and position t predicts token t + 1
            (a decoder-only language model, e.g. Idefics3); ``False``: an encoder-decoder's
            decoder, whose logits align with the labels (VT5, Pix2Struct).
        vt5_names: what the competition's VT5 names, in which the kit's presets and option
            defaults are written, mean in this family: a LoRA target (LoRA's default ``q`` and
            ``v`` give the family's default targets), LoRA's scope
            (``language_backbone``) or a parameter prefix (the frozen visual encoder
            ``visual_embedding.image_model.``) -> the family's names; an empty tuple drops a
            name with no counterpart. A name not listed is the family's own and kept as it is.
    """

    name: ClassVar[str] = ""
    title: ClassVar[str] = ""
    shapes: ClassVar[tuple[str, ...]] = ("tiny", "base")
    public_checkpoint: ClassVar[str] = ""
    decoder_only: ClassVar[bool] = False
    vt5_names: ClassVar[Mapping[str, tuple[str, ...]]] = {}

    @classmethod
    def translate(cls, names: Iterable[str]) -> tuple[str, ...]:
        """Names written for VT5 (a preset's LoRA targets, a frozen prefix) in this family's
        module names (:attr:`vt5_names`; the family's own names pass unchanged)."""
        return tuple(own for name in names for own in cls.vt5_names.get(name, (name,)))

    @classmethod
    def config_from_dict(cls, raw: dict[str, Any]) -> Any:
        """The family's configuration of a ``config.json`` object (raises ``TypeError`` or
        ``ValueError`` on a malformed one)."""
        raise NotImplementedError

    @classmethod
    def config_of(cls, config_path: Path, raw: dict[str, Any]) -> Any:
        """The family's configuration of the object read from ``config_path``.

        Raises:
            CheckpointError: naming the file, when the object is no valid configuration.
        """
        try:
            return cls.config_from_dict(raw)
        except (TypeError, ValueError) as error:
            raise CheckpointError(
                f"{config_path}: invalid {cls.title} configuration ({error})"
            ) from None

    @classmethod
    def read_config(cls, directory: str | Path) -> Any:
        """The configuration in a checkpoint directory of this family (its processor's
        settings are there).

        Raises:
            CheckpointError: the config is missing, unreadable, of another family or invalid.
        """
        config_path, raw = read_config_object(directory)
        if raw.get("model_type") != cls.name:
            raise CheckpointError(
                f"{config_path}: model_type is {str(raw.get('model_type'))[:40]!r}, expected "
                f"{cls.name!r} (a {cls.title} checkpoint)"
            )
        return cls.config_of(config_path, raw)

    @classmethod
    def model_class(cls) -> type:
        """The ``PreTrainedModel`` class of the family (built from its configuration)."""
        raise NotImplementedError

    @classmethod
    def load_processor(cls, directory: Path) -> DocumentProcessor:
        """The processor saved in a checkpoint directory (tokenizer and input settings)."""
        raise NotImplementedError

    @classmethod
    def random_model(cls, shape: str, tokenizer_dir: Path) -> tuple[Any, DocumentProcessor]:
        """A randomly initialised model of a named shape and its processor, with the tokenizer
        of ``tokenizer_dir`` (the shipped one for ``pflkit model init``)."""
        raise NotImplementedError

    @classmethod
    def convert_hub(cls, source: Path, target: Path) -> list[str]:
        """Write a kit checkpoint directory of the family's public checkpoint in its hub layout
        (``pflkit model convert --family``); returns what was done, one line each."""
        raise NotImplementedError(f"the {cls.title} family has no converter of a hub checkpoint")

    @classmethod
    def enable_gradient_checkpointing(cls, model: Any) -> None:
        """Recompute activations in the backward pass (transformers' own switch by default)."""
        model.gradient_checkpointing_enable()
