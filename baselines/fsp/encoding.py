"""A denoising example as VT5 inputs: token ids, box buckets and labels.

The input is laid out as a question's (:mod:`benchmark.model.processing_vt5`): the prompt with
the objective's instruction in the question slot (prompt box), then the page, every OCR word's
pieces with the word's box buckets and every added token with the zero box, cut to
``max_input_tokens - 1`` and EOS. The cut keeps whole segments only, and the target keeps the
groups of the masked tokens the input still holds, so no target asks for a token the input lost.
Words are lower-cased when the checkpoint's processor lower-cases OCR and answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from baselines.fsp.objectives import DenoisingExample, Item, Word
from baselines.fsp.vocabulary import DenoisingVocabulary
from benchmark.model.configuration_vt5 import PROMPT_BOX
from benchmark.model.processing_vt5 import PROMPT_TEMPLATE

ZERO_BUCKETS = (0, 0, 0, 0)


class DenoisingEncoder:
    """Turns denoising examples into model rows with one processor and vocabulary.

    Args:
        processor: the checkpoint's ``VT5Processor`` (tokenizer, box scale, lengths).
        vocabulary: the added tokens' ids.
    """

    def __init__(self, processor: Any, vocabulary: DenoisingVocabulary) -> None:
        self.processor = processor
        self.vocabulary = vocabulary
        self._pieces: dict[str, list[int]] = {}

    def encode(self, example: DenoisingExample, prompt: str) -> dict[str, list[int]]:
        """The example's ``input_ids``, flat ``input_boxes`` (4 a token) and ``labels``.

        Args:
            example: the example.
            prompt: the objective's instruction.

        Returns:
            Lists of ints; ``labels`` ends with EOS.
        """
        tokenizer = self.processor.tokenizer
        prompt_ids = tokenizer(PROMPT_TEMPLATE.format(prompt), add_special_tokens=True).input_ids
        ids = list(prompt_ids[:-1])
        boxes = list(PROMPT_BOX) * len(ids)
        limit = self.processor.max_input_tokens - 1
        kept_groups = 0
        for segment in example.inputs:
            segment_ids, segment_boxes = self._items(segment.items)
            if len(ids) + len(segment_ids) > limit:
                break
            ids += segment_ids
            boxes += segment_boxes
            if segment.masked is not None:
                kept_groups = segment.masked + 1
        labels: list[int] = []
        for group in example.targets[:kept_groups]:
            labels += self._items(group)[0]
        eos = self.processor.eos_token_id
        return {"input_ids": ids + [eos], "input_boxes": boxes + list(ZERO_BUCKETS),
                "labels": labels + [eos]}

    def _items(self, items: Sequence[Item]) -> tuple[list[int], list[int]]:
        """Ids and flat box buckets of some items."""
        ids: list[int] = []
        boxes: list[int] = []
        for item in items:
            if isinstance(item, Word):
                pieces = self._word_pieces(item.text)
                bucket = self.processor.box_buckets([item.box])[0]
                ids += pieces
                boxes += bucket * len(pieces)
            else:
                ids.append(self.vocabulary.id(item.name))
                boxes += ZERO_BUCKETS
        return ids, boxes

    def _word_pieces(self, text: str) -> list[int]:
        """The pieces of one word (cached: pages repeat words across rounds)."""
        if self.processor.lowercase_text:
            text = text.lower()
        if text not in self._pieces:
            self._pieces[text] = self.processor.tokenizer(text, add_special_tokens=False).input_ids
        return self._pieces[text]
