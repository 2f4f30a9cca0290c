"""Pix2Struct (Lee et al., ICML 2023): an OCR-free encoder-decoder reading the page as patches.

The encoder reads the page with the question drawn above it (:mod:`.processing`), the decoder
writes the answer; the public ``google/pix2struct-docvqa-base`` is this architecture in its
``base`` shape (transformers' ``Pix2StructForConditionalGeneration``, no remote code).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmark.model.families.base import DocumentProcessor, ModelFamily

#: The public DocVQA checkpoint's patches per page.
BASE_MAX_PATCHES = 2048
#: The tiny shape's patches per page (a 600 x 848 page at about 13 x 19 patches).
TINY_MAX_PATCHES = 256
#: Token rows of the public checkpoint's vocabulary.
BASE_VOCAB_ROWS = 50244
#: The tiny shape: 2 + 2 layers, 64 wide (about 0.8M parameters with the kit's tokenizer).
TINY_TEXT = {"hidden_size": 64, "d_kv": 16, "d_ff": 128, "num_layers": 2, "num_heads": 4}
TINY_VISION = {"hidden_size": 64, "d_kv": 16, "d_ff": 128, "num_hidden_layers": 2,
               "num_attention_heads": 4}  # fmt: skip


class Pix2Struct(ModelFamily):
    """Pix2Struct (base: 12 + 12 layers, 768 wide, as ``google/pix2struct-docvqa-base``)."""

    name = "pix2struct"
    title = "Pix2Struct"
    public_checkpoint = "google/pix2struct-docvqa-base"
    #: T5's projections have longer names here; VT5's backbone scope is the whole model (the
    #: encoder reads the question too); VT5's visual projection (trained and sent in full by
    #: LoRA, which gives track 2's noise floor a tensor to measure) is the patch projection;
    #: VT5's box table and its frozen DiT have no counterpart (the patch encoder is trained, as
    #: in the public fine-tuning).
    vt5_names = {
        "q": ("query",), "k": ("key",), "v": ("value",), "o": ("output",),
        "wi": ("wi_0", "wi_1"), "wo": ("wo",), "language_backbone": ("",),
        "spatial_embedding.": (),
        "visual_embedding.visual_emb_matcher.": ("encoder.embeddings.patch_projection.",),
        "visual_embedding.image_model.": (),
    }  # fmt: skip

    @classmethod
    def config_from_dict(cls, raw: dict[str, Any]) -> Any:
        """A ``Pix2StructConfig`` with the kit's input settings (``max_patches``,
        ``max_answer_tokens``) among its attributes."""
        from transformers import Pix2StructConfig

        config = Pix2StructConfig.from_dict(raw)
        for key in ("max_patches", "max_answer_tokens"):
            value = getattr(config, key, None)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{key} must be a positive integer, got {value!r}")
        return config

    @classmethod
    def model_class(cls) -> type:
        """transformers' ``Pix2StructForConditionalGeneration``."""
        from transformers import Pix2StructForConditionalGeneration

        return Pix2StructForConditionalGeneration

    @classmethod
    def load_processor(cls, directory: Path) -> DocumentProcessor:
        """A :class:`~benchmark.model.families.pix2struct.processing.Pix2StructProcessor`."""
        from benchmark.model.families.pix2struct.processing import Pix2StructProcessor

        return Pix2StructProcessor.from_pretrained(directory, cls.read_config(directory))

    @classmethod
    def random_model(cls, shape: str, tokenizer_dir: Path) -> tuple[Any, DocumentProcessor]:
        """``base``: transformers' defaults, which are the public checkpoint's shape;
        ``tiny``: :data:`TINY_TEXT` and :data:`TINY_VISION`."""
        from transformers import Pix2StructConfig

        from benchmark.model.families.pix2struct.processing import Pix2StructProcessor
        from benchmark.model.tokenizer import load_tokenizer

        tokenizer = load_tokenizer(tokenizer_dir)
        special = {"pad_token_id": tokenizer.pad_token_id, "eos_token_id": tokenizer.eos_token_id,
                   "decoder_start_token_id": tokenizer.pad_token_id}  # fmt: skip
        if shape == "base":
            text = {"vocab_size": max(BASE_VOCAB_ROWS, len(tokenizer)), **special}
            vision: dict[str, Any] = {}
            patches = BASE_MAX_PATCHES
        else:
            text = {**TINY_TEXT, "vocab_size": len(tokenizer), **special}
            vision = dict(TINY_VISION)
            patches = TINY_MAX_PATCHES
        config = Pix2StructConfig(text_config=text, vision_config=vision, is_vqa=True,
                                  max_patches=patches, max_answer_tokens=20, **special)  # fmt: skip
        model = cls.model_class()(config).eval()
        processor = Pix2StructProcessor.from_config(tokenizer, config)
        return model, processor.with_spiece_model(tokenizer_dir)

    @classmethod
    def convert_hub(cls, source: Path, target: Path) -> list[str]:
        """:func:`~benchmark.model.families.pix2struct.conversion.convert_hub_checkpoint`."""
        from benchmark.model.families.pix2struct.conversion import convert_hub_checkpoint

        return convert_hub_checkpoint(source, target)
