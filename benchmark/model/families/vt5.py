"""VT5: T5 reading the question, the OCR words with their boxes and the page's DiT features.

The 2023 competition's model (Tito et al.), implemented in :mod:`benchmark.model.modeling_vt5`,
:mod:`benchmark.model.configuration_vt5` and :mod:`benchmark.model.processing_vt5`; this module
only declares it to the kit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmark.model.families.base import DocumentProcessor, ModelFamily

#: Token rows of the T5 vocabulary (the public checkpoint's embedding).
T5_VOCAB_ROWS = 32128


class VT5(ModelFamily):
    """VT5 (T5-base + DiT-base in its real shape, 336,142,080 parameters)."""

    name = "vt5"
    title = "VT5"
    shapes = ("tiny", "base", "vt5-base")
    public_checkpoint = "rubentito/vt5-base-spdocvqa"

    @classmethod
    def config_from_dict(cls, raw: dict[str, Any]) -> Any:
        """A :class:`~benchmark.model.configuration_vt5.VT5Config`."""
        from benchmark.model.configuration_vt5 import VT5Config

        return VT5Config.from_dict(raw)

    @classmethod
    def model_class(cls) -> type:
        """:class:`~benchmark.model.modeling_vt5.VT5ForConditionalGeneration`."""
        from benchmark.model.modeling_vt5 import VT5ForConditionalGeneration

        return VT5ForConditionalGeneration

    @classmethod
    def load_processor(cls, directory: Path) -> DocumentProcessor:
        """A :class:`~benchmark.model.processing_vt5.VT5Processor`."""
        from benchmark.model.processing_vt5 import VT5Processor

        return VT5Processor.from_pretrained(directory, cls.read_config(directory))

    @classmethod
    def random_model(cls, shape: str, tokenizer_dir: Path) -> tuple[Any, DocumentProcessor]:
        """``base`` (``vt5-base``): T5-base + DiT-base, ``lm_head`` apart from the embedding as
        the public code holds it; ``tiny``: the kit's CPU shape."""
        from benchmark.model.modeling_vt5 import VT5ForConditionalGeneration
        from benchmark.model.presets import base_vt5_config, tiny_vt5_config
        from benchmark.model.processing_vt5 import VT5Processor
        from benchmark.model.tokenizer import load_tokenizer

        tokenizer = load_tokenizer(tokenizer_dir)
        if shape in ("base", "vt5-base"):
            config = base_vt5_config(vocab_size=max(T5_VOCAB_ROWS, len(tokenizer)))
        else:
            config = tiny_vt5_config(len(tokenizer))
        model = VT5ForConditionalGeneration(config).eval()
        processor = VT5Processor.from_config(tokenizer, config).with_spiece_model(tokenizer_dir)
        return model, processor

    @classmethod
    def enable_gradient_checkpointing(cls, model: Any) -> None:
        """VT5's own switch (T5 stack and DiT encoder)."""
        model.enable_gradient_checkpointing()
