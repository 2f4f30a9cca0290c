"""The three FSP denoising objectives on a hand-made page: which tokens are masked, what the
input and the target become, the added tokens' ids and the zero boxes of sentinel tokens."""

from __future__ import annotations

import random

import pytest

from baselines.fsp.objectives import (
    OBJECTIVES,
    ZERO_BOX,
    Segment,
    Special,
    Word,
    draw_masked,
)
from baselines.fsp.vocabulary import LOCATION_BINS, MAX_MASKED, location, sentinel
from tests.baselines.fsp_page import BOXES, WORDS

SEED = 3


def locs(box: tuple[float, ...]) -> tuple[Special, ...]:
    return tuple(Special(location(c)) for c in box)


def masked_of(name: str) -> list[int]:
    """The positions an objective masks on the page with the test's seed."""
    return draw_masked(len(WORDS), OBJECTIVES[name].p_m, random.Random(SEED))


def test_the_masking_probabilities_are_the_pilots() -> None:
    assert {name: o.p_m for name, o in OBJECTIVES.items()} == {"tm": 0.5, "lm": 0.75, "tlm": 0.15}


def test_masks_are_seeded_bounded_and_never_empty() -> None:
    assert draw_masked(300, 0.75, random.Random(1)) == draw_masked(300, 0.75, random.Random(1))
    many = draw_masked(300, 0.75, random.Random(1))
    assert len(many) == MAX_MASKED and many == sorted(many) and len(set(many)) == MAX_MASKED
    for seed in range(20):  # p_m 0.15 on 2 tokens draws none most of the time: one is forced
        assert len(draw_masked(2, 0.15, random.Random(seed))) >= 1
    assert draw_masked(0, 0.5, random.Random(0)) == []


def test_location_tokens_discretise_normalised_coordinates() -> None:
    assert location(0.0) == "<loc_0>"
    assert location(0.5) == f"<loc_{LOCATION_BINS // 2}>"
    assert location(1.0) == f"<loc_{LOCATION_BINS - 1}>"
    assert location(0.999) == f"<loc_{int(0.999 * LOCATION_BINS)}>"


def _check_unmasked(inputs: tuple[Segment, ...], masked: list[int]) -> None:
    for position, segment in enumerate(inputs):
        if position not in masked:
            assert segment == Segment(None, (Word(WORDS[position], BOXES[position]),))


def test_text_modelling_hides_the_text_and_keeps_its_location() -> None:
    masked = masked_of("tm")
    example = OBJECTIVES["tm"].example(WORDS, BOXES, random.Random(SEED))
    assert masked and len(example.targets) == len(masked)
    _check_unmasked(example.inputs, masked)
    for rank, position in enumerate(masked):
        mark = Special(sentinel("text", rank))
        assert example.inputs[position] == Segment(rank, (mark, *locs(BOXES[position])))
        assert example.targets[rank] == (mark, Word(WORDS[position]))


def test_layout_modelling_hides_the_location_and_keeps_the_text() -> None:
    masked = masked_of("lm")
    example = OBJECTIVES["lm"].example(WORDS, BOXES, random.Random(SEED))
    assert len(example.targets) == len(masked) > 1
    _check_unmasked(example.inputs, masked)
    for rank, position in enumerate(masked):
        mark = Special(sentinel("layout", rank))
        # the marked token's own box is zeroed: the target would be a copy otherwise
        assert example.inputs[position] == Segment(
            rank, (mark, Word(WORDS[position], ZERO_BOX), Special(f"</layout_{rank}>")))
        assert example.targets[rank] == (mark, *locs(BOXES[position]))


def test_text_layout_modelling_hides_both() -> None:
    masked = masked_of("tlm")
    example = OBJECTIVES["tlm"].example(WORDS, BOXES, random.Random(SEED))
    assert len(example.targets) == len(masked) >= 1
    _check_unmasked(example.inputs, masked)
    for rank, position in enumerate(masked):
        mark = Special(sentinel("text_layout", rank))
        assert example.inputs[position] == Segment(rank, (mark,))
        assert example.targets[rank] == (mark, Word(WORDS[position]), *locs(BOXES[position]))


def test_sentinel_names_are_checked() -> None:
    assert sentinel("/layout", 7) == "</layout_7>"
    with pytest.raises(ValueError, match="no sentinel"):
        sentinel("text", MAX_MASKED)
    with pytest.raises(ValueError, match="boxes"):
        OBJECTIVES["tm"].example(WORDS, BOXES[:2], random.Random(0))
