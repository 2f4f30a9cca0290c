"""The sentinel and location tokens of the denoising objectives, added for pre-training only.

The pilot study (Nguyen and Karatzas, "Federated Document Visual Question Answering: A Pilot
Study", ICDAR 2024, section 3.3, code ``khanhnguyen21006/fldocvqa``; after UDOP, Tang et al.
2023, https://arxiv.org/abs/2212.02623) marks masked positions with task sentinels ``<text_l>``,
``<layout_l>`` ... ``</layout_l>`` and ``<text_layout_l>`` (``l < L_M = 100``) and writes a
coordinate as a location token ``<loc_v>``, ``v`` a bin of the normalised coordinate.

**The choice: added rows, dropped after pre-training.** The kit's shipped base has a
SentencePiece vocabulary of 4,000 pieces and no sentinel at all (the public VT5 has T5's 100
``<extra_id_N>`` but no location token either), so reusing pieces would take 900 of them (a
quarter of the tiny vocabulary) from the text they spell. Instead the pre-training phase appends
900 rows to the tied token embedding (:func:`add_denoising_rows`, ids from the model's embedding
size on), seeded from the run's seed so every party builds the same rows. They travel with the
embedding in every pre-training message, so their bytes are counted in the log. At the end of
the phase the rows are cut off (:func:`drop_denoising_rows`): fine-tuning, its messages and the
submission have exactly the base architecture, which the evaluator checks against the reference
shapes. The sentinels and locations are never needed after pre-training: questions and answers
are plain text.

The number of bins is not stated by the pilot; ``LOCATION_BINS`` is UDOP's 500.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
from torch import nn

#: L_M, the most masked tokens per example, and so the sentinels of each kind (pilot: 100).
MAX_MASKED = 100
#: |V|, bins of a normalised coordinate (UDOP's 500).
LOCATION_BINS = 500
#: sentinel kinds in the order their rows are added.
SENTINEL_KINDS: tuple[str, ...] = ("text", "layout", "/layout", "text_layout")


def sentinel(kind: str, index: int) -> str:
    """The name of sentinel ``index`` of one kind: ``<text_3>``, ``</layout_0>``.

    Raises:
        ValueError: for an unknown kind or an index outside ``0..MAX_MASKED - 1``.
    """
    if kind not in SENTINEL_KINDS or not 0 <= index < MAX_MASKED:
        raise ValueError(f"no sentinel {kind!r} {index}; kinds {SENTINEL_KINDS}, "
                         f"indexes 0..{MAX_MASKED - 1}")
    slash = "/" if kind.startswith("/") else ""
    return f"<{slash}{kind.lstrip('/')}_{index}>"


def location(coordinate: float) -> str:
    """The location token of a normalised coordinate: ``f_d(c) = min(floor(c |V|), |V| - 1)``."""
    value = min(max(int(coordinate * LOCATION_BINS), 0), LOCATION_BINS - 1)
    return f"<loc_{value}>"


@dataclass(frozen=True)
class DenoisingVocabulary:
    """The added tokens' ids: every sentinel kind, then the location tokens, from ``first_id``.

    Attributes:
        first_id: the first added id (the model's embedding rows before pre-training).
    """

    first_id: int

    @property
    def size(self) -> int:
        """Rows added: 4 sentinel kinds x L_M + |V| location tokens."""
        return len(SENTINEL_KINDS) * MAX_MASKED + LOCATION_BINS

    def id(self, name: str) -> int:
        """The token id of a sentinel or location name.

        Raises:
            KeyError: for a name that is not an added token.
        """
        return self._ids[name]

    @functools.cached_property
    def _ids(self) -> dict[str, int]:
        """name -> id."""
        names = [sentinel(kind, i) for kind in SENTINEL_KINDS for i in range(MAX_MASKED)]
        names += [f"<loc_{v}>" for v in range(LOCATION_BINS)]
        return {name: self.first_id + i for i, name in enumerate(names)}


def embedding_rows(model: nn.Module) -> int:
    """Rows of the model's (tied) token embedding."""
    return int(model.get_input_embeddings().num_embeddings)


def add_denoising_rows(model: nn.Module, *, seed: int) -> DenoisingVocabulary:
    """Append the added tokens' rows to the token embedding and the output layer (tied or not).

    The new rows are the mean of the existing rows plus Gaussian noise of the existing rows'
    standard deviation, drawn from ``seed``: every party builds the same rows without a message.

    Args:
        model: a VT5 model (its ``language_backbone`` is resized in place).
        seed: the run's seed.

    Returns:
        The vocabulary of the added ids.
    """
    rows = embedding_rows(model)
    vocabulary = DenoisingVocabulary(first_id=rows)
    backbone = model.language_backbone
    old = backbone.get_input_embeddings().weight.detach()
    mean, std = old.mean(dim=0), old.std(dim=0)
    backbone.resize_token_embeddings(rows + vocabulary.size, mean_resizing=False)
    generator = torch.Generator().manual_seed(seed)
    noise = torch.randn(vocabulary.size, old.shape[1], generator=generator)
    with torch.no_grad():
        backbone.get_input_embeddings().weight[rows:] = mean + std * noise
        head = backbone.get_output_embeddings().weight
        if head is not backbone.get_input_embeddings().weight:
            # an lm_head of its own (the public code's) gets the same new rows a tied one has
            head[rows:] = mean + std * noise
    return vocabulary


def drop_denoising_rows(model: nn.Module, rows: int) -> nn.Module:
    """Cut the token embedding back to its first ``rows`` rows (the base architecture).

    Args:
        model: a VT5 model with added rows.
        rows: the base model's embedding rows.

    Returns:
        The same model, resized in place.
    """
    model.language_backbone.resize_token_embeddings(rows, mean_resizing=False)
    return model


def without_denoising_rows(weights: dict[str, torch.Tensor],
                           shapes: dict[str, tuple[int, ...]]) -> dict[str, torch.Tensor]:
    """Communicated weights of the pre-training model in the fine-tuning model's shapes.

    Args:
        weights: canonical name -> tensor (the embedding with added rows).
        shapes: canonical name -> the fine-tuning model's shape.

    Returns:
        The weights, every tensor with more rows than its fine-tuning shape cut to it.

    Raises:
        ValueError: when the two models communicate different tensors or differ elsewhere.
    """
    if set(weights) != set(shapes):
        raise ValueError("the pre-training and fine-tuning models communicate different tensors: "
                         f"{sorted(set(weights) ^ set(shapes))[:5]}")
    cut = {}
    for name, tensor in weights.items():
        shape = tuple(shapes[name])
        if tuple(tensor.shape) != shape and (tensor.shape[1:] != shape[1:]
                                             or tensor.shape[0] < shape[0]):
            raise ValueError(f"{name}: pre-training shape {tuple(tensor.shape)} does not extend "
                             f"the fine-tuning shape {shape}")
        cut[name] = tensor[: shape[0]].clone() if tuple(tensor.shape) != shape else tensor
    return cut
