"""Idefics3 / SmolVLM (Laurençon et al. 2024; Marafioti et al. 2025): a decoder-only
vision-language model reading the page as tiles.

A SigLIP-like vision encoder reads each tile of the page, a connector (pixel shuffle + one linear
layer) turns its patches into a few tokens, and a Llama decoder reads them with the question in a
chat prompt and continues with the answer (:mod:`.processing`).
``HuggingFaceTB/SmolVLM-256M-Instruct`` and ``SmolVLM-500M-Instruct`` are this architecture
(transformers' ``Idefics3ForConditionalGeneration``, no remote code); the kit's model is a
subclass whose ``generate`` returns the answer alone (:mod:`.modeling`).

The ``base`` shape is SmolVLM-256M-Instruct's, written here from the numbers of its public
``config.json`` and ``preprocessor_config.json`` (nothing was downloaded): SmolLM2-135M's Llama
(576 wide, 30 layers, 9 heads of 64, 3 key-value heads, 1,536 MLP, RoPE theta 100,000, 49,280
token rows, ``lm_head`` untied), a SigLIP-base vision encoder (768 wide, 12 layers, 12 heads,
16-pixel patches, 512-pixel tiles), a pixel shuffle of 4 (64 tokens a tile), pages resized to a
2,048-pixel longest edge. Counted on the meta device with the kit's tokenizer, it has
256,484,928 parameters (86,433,024 in the vision encoder, 7,077,888 in the connector,
134,588,736 in the decoder with its embedding, 28,385,280 in ``lm_head``), as the public
checkpoint's name says. ``pflkit model init --shape base`` gives it the kit's T5 tokenizer with
the template's tokens (4,041 of the 49,280 rows are used); the public weights read SmolVLM's own
byte-level BPE tokenizer, which a checkpoint converted from the hub's layout keeps
(``pflkit model convert --family idefics3``, :mod:`.conversion`) and its processor reads
(:func:`benchmark.model.tokenizer.load_checkpoint_tokenizer`).

The ``tiny`` shape (:data:`TINY_TEXT`, :data:`TINY_VISION`: 2 + 2 layers, 64 wide, 64-pixel
tiles of 8-pixel patches, a 128-pixel page: 2 x 2 tiles + the global view, 16 tokens each) has
691,200 parameters, small enough for a CPU training step of a few tens of milliseconds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmark.model.families.base import DocumentProcessor, ModelFamily

#: Token rows of SmolVLM-256M-Instruct's embedding and ``lm_head``.
BASE_VOCAB_ROWS = 49280
#: SmolVLM-256M-Instruct's text model (SmolLM2-135M), from its public config's numbers.
BASE_TEXT: dict[str, Any] = {
    "model_type": "llama", "hidden_size": 576, "intermediate_size": 1536,
    "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3, "head_dim": 64,
    "max_position_embeddings": 8192, "rms_norm_eps": 1e-5, "rope_theta": 100000.0,
    "tie_word_embeddings": False,
}  # fmt: skip
#: SmolVLM-256M-Instruct's vision encoder (SigLIP base, 16-pixel patches, 512-pixel tiles).
BASE_VISION: dict[str, Any] = {
    "hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
    "num_attention_heads": 12, "patch_size": 16, "image_size": 512,
}  # fmt: skip
#: SmolVLM-256M-Instruct's pixel shuffle (1,024 patches of a tile -> 64 tokens).
BASE_SCALE_FACTOR = 4
#: SmolVLM-256M-Instruct's page size before tiling (``preprocessor_config.json``'s ``size``).
BASE_LONGEST_EDGE = 2048
#: The tiny shape's text model: 2 Llama layers, 64 wide.
TINY_TEXT: dict[str, Any] = {
    "model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "max_position_embeddings": 1024, "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
}  # fmt: skip
#: The tiny shape's vision encoder: 2 layers, 64 wide, 64-pixel tiles of 8-pixel patches.
TINY_VISION: dict[str, Any] = {
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "patch_size": 8, "image_size": 64,
}  # fmt: skip
#: The tiny shape's pixel shuffle (64 patches of a tile -> 16 tokens).
TINY_SCALE_FACTOR = 2
#: The tiny shape's page size before tiling (a 600 x 848 page: 2 x 2 tiles + the global view).
TINY_LONGEST_EDGE = 128
#: Answer tokens generated at most, ``<end_of_utterance>`` included (VT5's bound).
MAX_ANSWER_TOKENS = 20


class Idefics3(ModelFamily):
    """Idefics3 / SmolVLM (base: SmolVLM-256M-Instruct's shape, 256,484,928 parameters)."""

    name = "idefics3"
    title = "SmolVLM (Idefics3)"
    public_checkpoint = "HuggingFaceTB/SmolVLM-256M-Instruct"
    decoder_only = True
    #: T5's projections are Llama's here. VT5's language backbone is the Llama decoder (the
    #: vision encoder has ``q_proj`` too, outside that scope); VT5's visual projection is the
    #: connector (trained in full by LoRA as VT5's is); its frozen DiT is the vision encoder;
    #: its box table has no counterpart (no OCR is read).
    vt5_names = {
        "q": ("q_proj",), "k": ("k_proj",), "v": ("v_proj",), "o": ("o_proj",),
        "wi": ("gate_proj", "up_proj"), "wo": ("down_proj",),
        "language_backbone": ("model.text_model",), "spatial_embedding.": (),
        "visual_embedding.visual_emb_matcher.": ("model.connector.",),
        "visual_embedding.image_model.": ("model.vision_model.",),
    }  # fmt: skip

    @classmethod
    def config_from_dict(cls, raw: dict[str, Any]) -> Any:
        """An ``Idefics3Config`` with the kit's input settings (``image_longest_edge``,
        ``max_answer_tokens``) among its attributes, checked against the tiles and the grid
        tokens."""
        from transformers import Idefics3Config

        from benchmark.model.families.idefics3.processing import (
            check_image_settings,
            image_tokens_per_tile,
        )

        config = Idefics3Config.from_dict(raw)
        for key in ("image_longest_edge", "max_answer_tokens"):
            value = getattr(config, key, None)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{key} must be a positive integer, got {value!r}")
        vision = config.vision_config
        image_tokens_per_tile(vision.image_size, vision.patch_size, config.scale_factor)
        check_image_settings(vision.image_size, config.image_longest_edge)
        if not 0 <= config.image_token_id < config.text_config.vocab_size:
            raise ValueError(f"image_token_id {config.image_token_id} is not a row of the "
                             f"{config.text_config.vocab_size}-token embedding")  # fmt: skip
        return config

    @classmethod
    def model_class(cls) -> type:
        """:class:`~benchmark.model.families.idefics3.modeling.Idefics3ForDocumentVQA`
        (transformers' class, ``generate`` returning the answer alone)."""
        from benchmark.model.families.idefics3.modeling import Idefics3ForDocumentVQA

        return Idefics3ForDocumentVQA

    @classmethod
    def load_processor(cls, directory: Path) -> DocumentProcessor:
        """An :class:`~benchmark.model.families.idefics3.processing.Idefics3DocumentProcessor`."""
        from benchmark.model.families.idefics3.processing import Idefics3DocumentProcessor

        return Idefics3DocumentProcessor.from_pretrained(directory, cls.read_config(directory))

    @classmethod
    def random_model(cls, shape: str, tokenizer_dir: Path) -> tuple[Any, DocumentProcessor]:
        """``base``: SmolVLM-256M-Instruct's shape (:data:`BASE_TEXT`, :data:`BASE_VISION`, its
        49,280 token rows); ``tiny``: :data:`TINY_TEXT` and :data:`TINY_VISION` with as many rows
        as the tokenizer has tokens. Both read the kit's tokenizer with the chat template's
        tokens added."""
        from transformers import Idefics3Config

        from benchmark.model.families.idefics3.processing import (
            END_OF_UTTERANCE,
            IMAGE_TOKEN,
            Idefics3DocumentProcessor,
            with_chat_tokens,
        )
        from benchmark.model.tokenizer import load_tokenizer

        if shape not in cls.shapes:
            raise ValueError(f"unknown {cls.title} shape {shape!r}; choose one of "
                             f"{', '.join(cls.shapes)}")  # fmt: skip
        tokenizer = with_chat_tokens(load_tokenizer(tokenizer_dir))
        if shape == "base":
            text = {**BASE_TEXT, "vocab_size": max(BASE_VOCAB_ROWS, len(tokenizer))}
            vision, scale_factor, longest_edge = BASE_VISION, BASE_SCALE_FACTOR, BASE_LONGEST_EDGE
        else:
            text = {**TINY_TEXT, "vocab_size": len(tokenizer)}
            vision, scale_factor, longest_edge = TINY_VISION, TINY_SCALE_FACTOR, TINY_LONGEST_EDGE
        # the answer ends with the template's end of turn; T5 has no beginning-of-sequence token
        text.update(pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
                    eos_token_id=tokenizer.convert_tokens_to_ids(END_OF_UTTERANCE))  # fmt: skip
        config = Idefics3Config(
            text_config=text, vision_config=dict(vision), scale_factor=scale_factor,
            image_token_id=tokenizer.convert_tokens_to_ids(IMAGE_TOKEN),
            pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False,
            image_longest_edge=longest_edge, max_answer_tokens=MAX_ANSWER_TOKENS,
        )  # fmt: skip
        model = cls.model_class()(config).eval()
        processor = Idefics3DocumentProcessor.from_config(tokenizer, config)
        return model, processor.with_spiece_model(tokenizer_dir)

    @classmethod
    def convert_hub(cls, source: Path, target: Path) -> list[str]:
        """:func:`~benchmark.model.families.idefics3.conversion.convert_hub_checkpoint` (SmolVLM's
        hub layout, its own byte-level BPE tokenizer kept)."""
        from benchmark.model.families.idefics3.conversion import convert_hub_checkpoint

        return convert_hub_checkpoint(source, target)
