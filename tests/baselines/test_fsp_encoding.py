"""FSP examples as VT5 inputs (ids, box buckets, labels) and the added embedding rows, on the
tiny random checkpoint of these tests."""

from __future__ import annotations

import copy
import random
from pathlib import Path

import pytest
import torch

from baselines.fsp.encoding import DenoisingEncoder
from baselines.fsp.objectives import OBJECTIVES, Word
from baselines.fsp.vocabulary import (
    LOCATION_BINS,
    MAX_MASKED,
    SENTINEL_KINDS,
    DenoisingVocabulary,
    add_denoising_rows,
    drop_denoising_rows,
    without_denoising_rows,
)
from tests.baselines.fsp_page import BOXES, WORDS


@pytest.fixture(scope="module")
def processor(tiny_base: Path):  # type: ignore[no-untyped-def]
    from benchmark.model import load_processor

    return load_processor(tiny_base)


def _prompt(processor, objective: str) -> list[int]:  # type: ignore[no-untyped-def]
    """The prompt's ids as a question's: the question-only encoding without its EOS."""
    return processor.encode_batch([OBJECTIVES[objective].prompt], [[]], [[]])["input_ids"][0][:-1]


def _expected(processor, vocabulary, items) -> tuple[list[int], list[int]]:  # type: ignore[no-untyped-def]
    ids: list[int] = []
    boxes: list[int] = []
    for item in items:
        if isinstance(item, Word):
            pieces = processor.tokenizer(item.text, add_special_tokens=False).input_ids
            ids += pieces
            boxes += processor.box_buckets([item.box])[0] * len(pieces)
        else:
            ids.append(vocabulary.id(item.name))
            boxes += [0, 0, 0, 0]
    return ids, boxes


@pytest.mark.parametrize("objective", sorted(OBJECTIVES))
def test_an_example_becomes_the_prompt_the_page_and_its_targets(processor, objective: str) -> None:  # type: ignore[no-untyped-def]
    vocabulary = DenoisingVocabulary(first_id=len(processor.tokenizer))
    example = OBJECTIVES[objective].example(WORDS, BOXES, random.Random(3))
    row = DenoisingEncoder(processor, vocabulary).encode(example, OBJECTIVES[objective].prompt)
    prompt = _prompt(processor, objective)
    page_ids, page_boxes = _expected(processor, vocabulary,
                                     [i for s in example.inputs for i in s.items])
    assert row["input_ids"] == prompt + page_ids + [processor.eos_token_id]
    assert row["input_boxes"][4 * len(prompt):] == page_boxes + [0, 0, 0, 0]
    target_ids, _ = _expected(processor, vocabulary, [i for g in example.targets for i in g])
    assert row["labels"] == target_ids + [processor.eos_token_id]
    added = [i for i in row["input_ids"] + row["labels"] if i >= vocabulary.first_id]
    assert added, "every objective puts sentinels in the input and the target"
    flat = row["input_boxes"]
    for position, token in enumerate(row["input_ids"]):
        if token >= vocabulary.first_id:  # sentinel and location tokens have the zero box
            assert flat[4 * position: 4 * position + 4] == [0, 0, 0, 0]


def test_a_cut_input_keeps_the_targets_of_the_masked_tokens_it_holds(processor) -> None:  # type: ignore[no-untyped-def]
    vocabulary = DenoisingVocabulary(first_id=len(processor.tokenizer))
    example = OBJECTIVES["tlm"].example(WORDS * 20, BOXES * 20, random.Random(0))
    narrow = copy.copy(processor)
    narrow.max_input_tokens = len(_prompt(processor, "tlm")) + 60
    row = DenoisingEncoder(narrow, vocabulary).encode(example, OBJECTIVES["tlm"].prompt)
    assert len(row["input_ids"]) <= narrow.max_input_tokens
    kept = sum(1 for token in row["input_ids"] if token >= vocabulary.first_id)
    assert 0 < kept < len(example.targets)
    marks = [token for token in row["labels"]
             if vocabulary.id("<text_layout_0>") <= token < vocabulary.id("<loc_0>")]
    assert marks == [vocabulary.id(f"<text_layout_{rank}>") for rank in range(kept)]


def test_the_vocabulary_adds_every_sentinel_kind_then_the_locations() -> None:
    vocabulary = DenoisingVocabulary(first_id=4000)
    assert vocabulary.size == len(SENTINEL_KINDS) * MAX_MASKED + LOCATION_BINS == 900
    assert vocabulary.id("<text_0>") == 4000
    assert vocabulary.id("</layout_0>") == 4000 + 2 * MAX_MASKED
    assert vocabulary.id(f"<loc_{LOCATION_BINS - 1}>") == 4000 + 899


def test_added_rows_are_seeded_tied_and_dropped_back_to_the_base(tiny_base: Path) -> None:
    from benchmark.model import load_model

    base = load_model(tiny_base)
    rows = base.get_input_embeddings().num_embeddings
    first, second = copy.deepcopy(base), copy.deepcopy(base)
    vocabulary = add_denoising_rows(first, seed=7)
    add_denoising_rows(second, seed=7)
    grown = first.get_input_embeddings().weight
    assert vocabulary.first_id == rows and grown.shape[0] == rows + vocabulary.size
    assert first.language_backbone.lm_head.weight is grown
    assert torch.equal(grown, second.get_input_embeddings().weight)
    assert torch.equal(grown[:rows], base.get_input_embeddings().weight)
    weights = {"language_backbone.shared.weight": grown.detach()}
    cut = without_denoising_rows(weights, {"language_backbone.shared.weight": (rows, grown.shape[1])})
    assert torch.equal(cut["language_backbone.shared.weight"], base.get_input_embeddings().weight)
    drop_denoising_rows(first, rows)
    assert {k: v.shape for k, v in first.state_dict().items()} == {
        k: v.shape for k, v in base.state_dict().items()}
    with pytest.raises(ValueError, match="does not extend"):
        without_denoising_rows(weights, {"language_backbone.shared.weight": (rows + 901, 1)})
