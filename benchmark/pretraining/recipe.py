"""The pre-training recipe of the shipped tiny VT5 base model.

A tiny T5 trained from scratch learns answer *formats* within minutes but learns to *copy*
values out of the context slowly (see the reference's measurements). The recipe attacks that
with three choices:

- a curriculum from short to long contexts: early stages crop each page to a few words around
  the answer, so every step is cheap and the answer is easy to locate; later stages widen the
  window up to the whole page;
- copy objectives before and beside the QA pairs: transcription ("read the text": reproduce a
  few words, which no answer prior can guess, so the copy mechanism must form) and reading
  ("what follows X?": find a word, copy what follows), which give every document many copy
  targets that never repeat;
- moved layouts: most examples have all their boxes scaled and shifted at random, so that the
  model finds an answer by the words around it rather than by where the template puts it, and
  transfers to the invoices' layouts;
- a narrow, shallow model with a small vocabulary and no dropout, so a CPU step is short and the
  tied input/output embedding makes copying a token the natural output of attention.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Stage:
    """One curriculum stage.

    Attributes:
        steps: optimiser steps spent in this stage.
        window_words: OCR words kept around the answer (None: the whole page).
        reading_share: fraction of examples that are reading ("what follows X?") questions.
        transcription_share: fraction of examples that are transcriptions ("read the text").
    """

    steps: int
    window_words: int | None
    reading_share: float
    transcription_share: float = 0.0


#: T5 backbone of the tiny base: 128 wide, 3 + 3 layers, 4 heads (about 2M parameters).
TINY_LANGUAGE = {
    "d_model": 128,
    "d_kv": 32,
    "d_ff": 512,
    "num_layers": 3,
    "num_decoder_layers": 3,
    "num_heads": 4,
    "dropout_rate": 0.0,
}

#: Image encoder of the tiny base: one 64-wide BEiT layer on a 128 px page, 32 px patches
#: (16 patches + CLS = 17 visual tokens, against 197 for DiT-base: the page image matters far
#: less than the text here, and every visual token costs encoder time on a CPU).
TINY_VISUAL = {
    "hidden_size": 64,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "intermediate_size": 128,
    "image_size": 128,
    "patch_size": 32,
    "drop_path_rate": 0.0,
}


@dataclass(frozen=True)
class PretrainingRecipe:
    """Everything that decides the pre-trained base, documented once.

    Attributes:
        vocab_size: SentencePiece pieces trained on the public corpus.
        language_config: T5 overrides of the tiny preset.
        visual_config: BEiT overrides of the tiny preset.
        spatial_embedding_dim: width of the x/y box tables.
        moved_share: fraction of examples whose layout is moved (scaled and shifted at random).
        stages: the curriculum, in order.
        batch_size: examples per optimiser step.
        learning_rate: AdamW peak learning rate.
        warmup_steps: linear warm-up before the cosine decay.
        min_learning_rate: learning rate at the end of the cosine decay.
        weight_decay: AdamW weight decay.
        max_grad_norm: gradient clipping norm.
        max_answer_tokens: label length bound.
        eval_every: steps between held-out evaluations.
        checkpoint_every: steps between resumable checkpoints.
        eval_questions: held-out questions scored at each evaluation.
        seed: seed of the initialisation and of the example stream.
    """

    vocab_size: int = 4000
    language_config: dict[str, Any] = field(default_factory=lambda: dict(TINY_LANGUAGE))
    visual_config: dict[str, Any] = field(default_factory=lambda: dict(TINY_VISUAL))
    spatial_embedding_dim: int = 8
    moved_share: float = 0.75
    stages: tuple[Stage, ...] = (
        Stage(steps=1000, window_words=None, reading_share=0.0, transcription_share=1.0),
        Stage(steps=1500, window_words=8, reading_share=0.5, transcription_share=0.2),
        Stage(steps=2000, window_words=16, reading_share=0.3, transcription_share=0.1),
        Stage(steps=3000, window_words=32, reading_share=0.2),
        Stage(steps=4000, window_words=64, reading_share=0.2),
        Stage(steps=5000, window_words=None, reading_share=0.2),
    )
    batch_size: int = 16
    learning_rate: float = 1e-3
    warmup_steps: int = 300
    min_learning_rate: float = 1e-4
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    max_answer_tokens: int = 24
    eval_every: int = 250
    checkpoint_every: int = 250
    eval_questions: int = 200
    seed: int = 0

    @property
    def total_steps(self) -> int:
        """Optimiser steps over all stages."""
        return sum(stage.steps for stage in self.stages)

    def stage_at(self, step: int) -> Stage:
        """The curriculum stage that a (0-based) step belongs to."""
        boundary = 0
        for stage in self.stages:
            boundary += stage.steps
            if step < boundary:
                return stage
        return self.stages[-1]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, written next to the checkpoints."""
        return asdict(self)


TINY_RECIPE = PretrainingRecipe()
