"""`VT5Config`: one configuration for the language backbone, the layout and the image encoder.

VT5 (Tito et al., "Hierarchical multimodal transformers for Multi-Page DocVQA", 2023) is a T5
encoder-decoder whose encoder input is the sum of token and spatial (box) embeddings followed by
projected DiT/BEiT patch embeddings of the page image. The T5 and BEiT settings are held as plain
dictionaries so that `config.json` stays one self-describing file.
"""

from __future__ import annotations

from typing import Any

from transformers import BeitConfig, PretrainedConfig, T5Config

#: Bucket ids of the box given to every prompt token: the whole page in the 0-1000 space.
PROMPT_BOX: tuple[int, int, int, int] = (0, 0, 1000, 1000)
#: PIL's resampling filters by name, with the integer codes image processors record
#: (`preprocessor_config.json`'s `resample`: 0 nearest, 2 bilinear, 3 bicubic, ...).
RESAMPLE_FILTERS: dict[str, int] = {
    "nearest": 0, "lanczos": 1, "bilinear": 2, "bicubic": 3, "box": 4, "hamming": 5,
}
#: The DiT image processor's normalisation (mean and std 0.5 per channel).
DIT_IMAGE_MEAN = (0.5, 0.5, 0.5)
DIT_IMAGE_STD = (0.5, 0.5, 0.5)


class VT5Config(PretrainedConfig):
    """Configuration of `VT5ForConditionalGeneration`.

    Attributes:
        language_config: keyword arguments of the T5 backbone's `T5Config`.
        visual_config: keyword arguments of the image encoder's `BeitConfig` (DiT is BEiT).
        max_2d_position_embeddings: rows of the x and y box tables (1024 in the reference).
        spatial_embedding_dim: width of the x/y tables; a `Linear` maps it to `d_model`.
            `None` means `d_model`, as in the reference checkpoint.
        box_scale: factor applied to the [0, 1] OCR box coordinates before they are truncated
            to integer bucket ids. The public vt5-base checkpoint was trained with 1 (no
            rescaling, so every coordinate became 0 or 1); the kit's models use 1000.
        max_input_tokens: text tokens per question (prompt + OCR + EOS), 512 in the reference.
        max_answer_tokens: bound on generated answer tokens (EOS included). The public code
            generated with transformers' default `max_length` 20, which counts the decoder
            start token: 19 answer tokens.
        use_visual: append the projected image tokens to the encoder input.
        lowercase_text: lower-case the OCR words and the target answers before tokenising
            (the question is kept as it is). The public code's dataset class did, so a
            checkpoint trained by it expects lower-cased words; the kit's base keeps the case.
        image_resample: PIL filter that resizes the page image to `image_size` ("bilinear" in
            the DiT image processor the public checkpoint was trained with, `resample: 2`;
            "bicubic" for the kit's base).
        image_mean: per-channel mean subtracted from the [0, 1] pixels (DiT: 0.5).
        image_std: per-channel standard deviation the pixels are divided by (DiT: 0.5).
        tie_lm_head: the output layer `lm_head` is the token embedding `shared` itself (T5's
            tying, the kit's own models). `False`: `lm_head` is a parameter of its own, loaded,
            trained and sent apart from `shared`, as in the public VT5 code, whose `HF_VT5`
            never re-ties its inner T5 after loading (checkpoints converted from the public
            layout). Either way the encoder's and decoder's `embed_tokens` are `shared`, and the
            decoder output is scaled by `d_model ** -0.5` before `lm_head` (T5's tied-model
            scaling, which the public config keeps on).
    """

    model_type = "vt5"

    language_config: dict | None = None
    visual_config: dict | None = None
    max_2d_position_embeddings: int = 1024
    spatial_embedding_dim: int | None = None
    box_scale: float = 1000.0
    max_input_tokens: int = 512
    max_answer_tokens: int = 20
    use_visual: bool = True
    lowercase_text: bool = False
    image_resample: str = "bicubic"
    image_mean: list[float] | None = None
    image_std: list[float] | None = None
    tie_lm_head: bool = True
    layer_norm_eps: float = 1e-12
    hidden_dropout_prob: float = 0.1
    is_encoder_decoder: bool = True
    pad_token_id: int | None = 0
    eos_token_id: int | None = 1
    decoder_start_token_id: int | None = 0

    def __post_init__(self, **kwargs: Any) -> None:
        if self.language_config is None:
            self.language_config = {}
        if self.visual_config is None:
            self.visual_config = {}
        if isinstance(self.language_config, PretrainedConfig):
            self.language_config = self.language_config.to_diff_dict()
        if isinstance(self.visual_config, PretrainedConfig):
            self.visual_config = self.visual_config.to_diff_dict()
        self.language_config = {
            k: v for k, v in self.language_config.items() if k not in _DROPPED_SUBCONFIG_KEYS
        }
        self.visual_config = {
            k: v for k, v in self.visual_config.items() if k not in _DROPPED_SUBCONFIG_KEYS
        }
        self.language_config.setdefault("model_type", "t5")
        self.language_config.setdefault("decoder_start_token_id", 0)
        self.visual_config.setdefault("model_type", "beit")
        if self.language_config["model_type"] != "t5":
            raise ValueError(
                f"VT5Config.language_config must describe a T5 model, got model_type "
                f"{self.language_config['model_type']!r}"
            )
        if self.visual_config["model_type"] != "beit":
            raise ValueError(
                f"VT5Config.visual_config must describe a BEiT/DiT model, got model_type "
                f"{self.visual_config['model_type']!r}"
            )
        self.image_mean = [float(v) for v in (self.image_mean or DIT_IMAGE_MEAN)]
        self.image_std = [float(v) for v in (self.image_std or DIT_IMAGE_STD)]
        if len(self.image_mean) != 3 or len(self.image_std) != 3 or min(self.image_std) <= 0:
            raise ValueError(
                "VT5Config.image_mean and image_std need three values (one per RGB channel), "
                f"positive standard deviations; got {self.image_mean} and {self.image_std}"
            )
        if self.image_resample not in RESAMPLE_FILTERS:
            raise ValueError(
                f"VT5Config.image_resample is {self.image_resample!r}; use one of "
                f"{', '.join(RESAMPLE_FILTERS)}"
            )
        if self.box_scale <= 0:
            raise ValueError(f"VT5Config.box_scale must be positive, got {self.box_scale}")
        if self.max_input_tokens < 2 or self.max_answer_tokens < 1:
            raise ValueError(
                "VT5Config.max_input_tokens must be >= 2 and max_answer_tokens >= 1, got "
                f"{self.max_input_tokens} and {self.max_answer_tokens}"
            )
        super().__post_init__(**kwargs)

    @property
    def t5_config(self) -> T5Config:
        """The language backbone's configuration."""
        kwargs = {k: v for k, v in self.language_config.items() if k != "model_type"}
        return T5Config(**kwargs)

    @property
    def beit_config(self) -> BeitConfig:
        """The image encoder's configuration."""
        kwargs = {k: v for k, v in self.visual_config.items() if k != "model_type"}
        return BeitConfig(**kwargs)

    @property
    def d_model(self) -> int:
        """Width of the T5 backbone."""
        return self.t5_config.d_model

    @property
    def vocab_size(self) -> int:
        """Rows of the T5 token embedding."""
        return self.t5_config.vocab_size

    @property
    def spatial_dim(self) -> int:
        """Width of the x/y box tables."""
        return self.spatial_embedding_dim or self.d_model

    @property
    def image_size(self) -> int:
        """Side of the square page image fed to the image encoder, in pixels."""
        size = self.beit_config.image_size
        return int(size if isinstance(size, int) else size[0])

    @property
    def num_visual_tokens(self) -> int:
        """Visual tokens per page: one per patch plus the CLS token (197 at 224 px, patch 16)."""
        if not self.use_visual:
            return 0
        beit = self.beit_config
        patch = beit.patch_size if isinstance(beit.patch_size, int) else beit.patch_size[0]
        return (self.image_size // patch) ** 2 + 1


# Keys that transformers adds to every serialised config; they carry no architecture.
_DROPPED_SUBCONFIG_KEYS = frozenset(
    {"transformers_version", "architectures", "_name_or_path", "torch_dtype", "dtype"}
)
