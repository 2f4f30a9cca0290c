"""The three denoising objectives of federated self-pretraining, on one page's OCR tokens.

Pilot study, section 3.3 (after UDOP, https://arxiv.org/abs/2212.02623, with masking at token
level only): a set ``M`` of OCR tokens is drawn, each token with probability ``p_m`` and at most
``L_M`` of them (at least one on a non-empty page, so every example has a target), and the
``l``-th masked token ``t_m`` with box ``b_m`` becomes:

- **Text Modelling** (``tm``, p_m 0.5): in the input ``<text_l> <loc x0> <loc y0> <loc x1>
  <loc y1>``; the target gets ``<text_l> t_m`` (the text, given where it is).
- **Layout Modelling** (``lm``, p_m 0.75): in the input ``<layout_l> t_m </layout_l>``, the
  token's box set to zero (with its box in the input the target would be a copy); the target
  gets ``<layout_l> <loc x0> <loc y0> <loc x1> <loc y1>`` (where the text is).
- **Text-Layout Modelling** (``tlm``, p_m 0.15): in the input ``<text_layout_l>``; the target
  gets ``<text_layout_l> t_m <loc x0> <loc y0> <loc x1> <loc y1>`` (both).

Sentinel and location tokens have the zero box, as in the pilot. An example is symbolic
(:class:`Word` and :class:`Special` items); :mod:`baselines.fsp.encoding` turns it into ids.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from baselines.fsp.vocabulary import MAX_MASKED, location, sentinel

Box = tuple[float, float, float, float]
ZERO_BOX: Box = (0.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Word:
    """An OCR token with its normalised box (ignored in a target)."""

    text: str
    box: Box = ZERO_BOX


@dataclass(frozen=True)
class Special:
    """An added sentinel or location token, by name (box zero)."""

    name: str


Item = Word | Special


@dataclass(frozen=True)
class Segment:
    """What one OCR token became in the input.

    Attributes:
        masked: ``l`` for the l-th masked token, ``None`` for a token left as it is.
        items: its input items.
    """

    masked: int | None
    items: tuple[Item, ...]


@dataclass(frozen=True)
class DenoisingExample:
    """One page under one objective.

    Attributes:
        objective: ``tm``, ``lm`` or ``tlm``.
        inputs: one segment per OCR token, in page order.
        targets: one group per masked token, group ``l`` for the l-th (sentinel first).
    """

    objective: str
    inputs: tuple[Segment, ...]
    targets: tuple[tuple[Item, ...], ...]


def draw_masked(n_tokens: int, p_m: float, rng: random.Random) -> list[int]:
    """Indices of the masked tokens: each with probability ``p_m``, at least one, at most L_M.

    Args:
        n_tokens: OCR tokens of the page.
        p_m: masking probability.
        rng: the example's random source.

    Returns:
        Sorted indices.
    """
    chosen = [i for i in range(n_tokens) if rng.random() < p_m]
    if not chosen and n_tokens:
        chosen = [rng.randrange(n_tokens)]
    if len(chosen) > MAX_MASKED:
        chosen = sorted(rng.sample(chosen, MAX_MASKED))
    return chosen


def locations(box: Sequence[float]) -> tuple[Special, ...]:
    """The four location tokens of a box (x0, y0, x1, y1)."""
    return tuple(Special(location(float(c))) for c in box)


#: (input items, target items) of the l-th masked token of each objective.
Masking = Callable[[int, Word], tuple[tuple[Item, ...], tuple[Item, ...]]]


def _text_modelling(index: int, word: Word) -> tuple[tuple[Item, ...], tuple[Item, ...]]:
    mark = Special(sentinel("text", index))
    return (mark, *locations(word.box)), (mark, Word(word.text))


def _layout_modelling(index: int, word: Word) -> tuple[tuple[Item, ...], tuple[Item, ...]]:
    mark = Special(sentinel("layout", index))
    return ((mark, Word(word.text), Special(sentinel("/layout", index))),
            (mark, *locations(word.box)))


def _text_layout_modelling(index: int, word: Word) -> tuple[tuple[Item, ...], tuple[Item, ...]]:
    mark = Special(sentinel("text_layout", index))
    return (mark,), (mark, Word(word.text), *locations(word.box))


@dataclass(frozen=True)
class Objective:
    """One denoising objective.

    Attributes:
        name: its key (``tm``, ``lm``, ``tlm``).
        p_m: the masking probability.
        prompt: the task's instruction in the input's question slot.
        masking: what a masked token becomes in the input and the target.
    """

    name: str
    p_m: float
    prompt: str
    masking: Masking

    def example(self, words: Sequence[str], boxes: Sequence[Sequence[float]],
                rng: random.Random) -> DenoisingExample:
        """The page as this objective's example.

        Args:
            words: OCR tokens.
            boxes: their normalised boxes.
            rng: the example's random source.

        Returns:
            The example.

        Raises:
            ValueError: when words and boxes differ in number.
        """
        if len(words) != len(boxes):
            raise ValueError(f"{len(words)} OCR tokens but {len(boxes)} boxes")
        masked = {position: rank for rank, position in
                  enumerate(draw_masked(len(words), self.p_m, rng))}
        inputs: list[Segment] = []
        targets: list[tuple[Item, ...]] = []
        for position, (text, box) in enumerate(zip(words, boxes, strict=True)):
            word = Word(text, tuple(float(c) for c in box))
            if position not in masked:
                inputs.append(Segment(None, (word,)))
                continue
            given, wanted = self.masking(masked[position], word)
            inputs.append(Segment(masked[position], given))
            targets.append(wanted)
        return DenoisingExample(self.name, tuple(inputs), tuple(targets))


OBJECTIVES: dict[str, Objective] = {
    objective.name: objective
    for objective in (
        Objective("tm", 0.5, "text modelling", _text_modelling),
        Objective("lm", 0.75, "layout modelling", _layout_modelling),
        Objective("tlm", 0.15, "text layout modelling", _text_layout_modelling),
    )
}
