"""SmolVLM's inputs for a PFL-DocVQA record: the page as tiles, the question in a chat prompt.

Idefics3 (the architecture of SmolVLM-256M/500M) reads no OCR. The page is cut as transformers'
``Idefics3ImageProcessorPil`` cuts it for the public checkpoint: resized so that its longest edge
is ``image_longest_edge`` (2,048 pixels for SmolVLM-256M), enlarged to whole tiles of
``tile_size`` pixels (512) and split into a grid of tiles plus one global view of the whole page
(a 600 x 848 benchmark page: 4 x 3 tiles + 1, 64 tokens each). The prompt is SmolVLM's chat
template with those image tokens laid out as transformers' ``Idefics3Processor`` lays them out::

    <|im_start|>User:<fake_token_around_image><row_1_col_1><image>...<image>...
    <fake_token_around_image><global-img><image>...<image><fake_token_around_image>
    {question}<end_of_utterance>\\nAssistant: {answer}<end_of_utterance>

built from ids directly (no string of 832 ``<image>`` tokens to tokenise). Text is whichever
tokenizer the checkpoint directory holds (:func:`benchmark.model.tokenizer.load_checkpoint_tokenizer`):
the kit's own T5 SentencePiece tokenizer with the template's tokens added as special tokens
(:data:`CHAT_TOKENS`, always in that order, so their ids are the same wherever the tokenizer is
rebuilt), or SmolVLM's own byte-level BPE (``tokenizer.json``, a converted public checkpoint,
:mod:`.conversion`), which has them all in its vocabulary. Either way the tokens are looked up by
their text and checked against the model's configuration (``image_token_id``, the text model's
``eos_token_id``). Training labels are -100 on the prompt and on padding: only the answer and
its ``<end_of_utterance>`` are learned.

Pages are cut once: a processor keeps the 8-bit tiles of the pages it has read
(:data:`TILE_CACHE_BYTES`) and rescales and normalises them with the image processor's own
methods for each batch, so the pixels are those of the public processor, bit for bit, and a local
epoch or a page's next question does not decode and resample the page again.

Padding: a decoder-only model continues the last token of its input, so prompts for generation
are padded on the left (transformers' ``generate`` derives the positions from the attention
mask); training rows are padded on the right, which gives every real token the same positions
as at generation.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmark.model.checkpoint_tokenizer import CheckpointTokenizer
from benchmark.model.families.page_image import open_page
from benchmark.model.tokenizer import load_checkpoint_tokenizer

FAKE_IMAGE_TOKEN = "<fake_token_around_image>"
IMAGE_TOKEN = "<image>"
GLOBAL_IMAGE_TOKEN = "<global-img>"
END_OF_UTTERANCE = "<end_of_utterance>"
TURN_START = "<|im_start|>"
#: Rows and columns of tiles the grid tokens name (transformers' ``Idefics3Processor``: 6 x 6).
MAX_GRID = 6
GRID_TOKENS = tuple(f"<row_{row}_col_{col}>" for row in range(1, MAX_GRID + 1)
                    for col in range(1, MAX_GRID + 1))  # fmt: skip
#: The tokens the template needs beyond the T5 pieces, added in this order.
CHAT_TOKENS: tuple[str, ...] = (
    FAKE_IMAGE_TOKEN, IMAGE_TOKEN, GLOBAL_IMAGE_TOKEN, END_OF_UTTERANCE, TURN_START, *GRID_TOKENS,
)  # fmt: skip
#: Question tokens kept (PFL-DocVQA questions are a dozen tokens; a runaway one is cut).
MAX_QUESTION_TOKENS = 64
#: SmolVLM's normalisation of pixels (mean and standard deviation 0.5 per channel).
PIXEL_MEAN = (0.5, 0.5, 0.5)
PIXEL_STD = (0.5, 0.5, 0.5)
#: Bytes of tiled pages a processor keeps (8-bit, before normalisation; least recently used
#: dropped first): local epochs and a page's other questions reuse them instead of decoding and
#: resampling the page again (SmolVLM-256M's 13 tiles of a page: 10 MB; the tiny shape's: 60 kB).
TILE_CACHE_BYTES = 512 * 2**20

#: A page's tile grid: ``(rows, cols)``, ``(0, 0)`` when the global view alone is read.
Grid = tuple[int, int]
#: A page's 8-bit tiles (CHW, the global view last) and its grid.
PageTiles = tuple[tuple[np.ndarray, ...], Grid]


def with_chat_tokens(tokenizer: Any) -> Any:
    """The tokenizer with every :data:`CHAT_TOKENS` entry it lacks added as a special token.

    Added in :data:`CHAT_TOKENS`' order after the T5 pieces, so a tokenizer rebuilt from
    ``spiece.model`` gets the ids a saved ``tokenizer.json`` holds; a tokenizer that has them
    all is returned unchanged.
    """
    from transformers import AddedToken

    vocabulary = tokenizer.get_vocab()
    missing = [token for token in CHAT_TOKENS if token not in vocabulary]
    if missing:
        added = [AddedToken(token, normalized=False, special=True) for token in missing]
        tokenizer.add_tokens(added, special_tokens=True)
    return tokenizer


def image_tokens_per_tile(tile_size: int, patch_size: int, scale_factor: int) -> int:
    """Tokens the connector makes of one tile: its patches over the pixel shuffle's factor².

    Raises:
        ValueError: when the tile is not a whole number of patches or those patches cannot be
            shuffled by the factor (Idefics3's connector needs both).
    """
    if tile_size % patch_size:
        raise ValueError(f"image_size {tile_size} is not a multiple of patch_size {patch_size}")
    side = tile_size // patch_size
    if side % scale_factor:
        raise ValueError(f"{side} patches per side cannot be shuffled by scale_factor "
                         f"{scale_factor}")  # fmt: skip
    return (side // scale_factor) ** 2


class Idefics3DocumentProcessor(CheckpointTokenizer):
    """Page tiles, chat prompts, labels and decoding for Idefics3 / SmolVLM.

    Args:
        tokenizer: the kit's T5 tokenizer (the template's tokens are added when missing) or
            SmolVLM's own (which has them); it needs a padding token.
        tile_size: pixels of a tile's side (the vision encoder's ``image_size``).
        image_longest_edge: the page's longest edge before it is cut into tiles.
        image_seq_len: ``<image>`` tokens per tile (:func:`image_tokens_per_tile`).
        max_answer_tokens: bound on generated answer tokens, ``<end_of_utterance>`` included.

    Raises:
        ValueError: for settings the tiles or the grid tokens cannot express.
    """

    input_columns: tuple[str, ...] = ("question", "image_path")
    page_features = False
    use_visual = True

    def __init__(self, tokenizer: Any, *, tile_size: int, image_longest_edge: int,
                 image_seq_len: int, max_answer_tokens: int = 20) -> None:  # fmt: skip
        check_image_settings(tile_size, image_longest_edge)
        if image_seq_len < 1:
            raise ValueError(f"image_seq_len must be >= 1, got {image_seq_len}")
        if max_answer_tokens < 1:
            raise ValueError(f"max_answer_tokens must be >= 1, got {max_answer_tokens}")
        self.tokenizer = with_chat_tokens(tokenizer)
        self.tile_size = int(tile_size)
        self.image_longest_edge = int(image_longest_edge)
        self.image_seq_len = int(image_seq_len)
        self.max_answer_tokens = int(max_answer_tokens)
        ids = {token: self.tokenizer.convert_tokens_to_ids(token) for token in CHAT_TOKENS}
        self._ids = ids
        self.image_token_id = ids[IMAGE_TOKEN]
        self.end_of_utterance_id = ids[END_OF_UTTERANCE]
        if self.tokenizer.pad_token_id is None:
            raise ValueError("the tokenizer has no padding token (tokenizer_config.json's "
                             "pad_token); prompts are padded with it")  # fmt: skip
        self.pad_token_id = int(self.tokenizer.pad_token_id)
        self._prefix = [ids[TURN_START], *self._text_ids("User:")]
        self._suffix = [self.end_of_utterance_id, *self._text_ids("\nAssistant:")]
        self._newline = self._text_ids("\n")
        self._page_sizes: dict[str, tuple[int, int]] = {}
        self._tiles: OrderedDict[str, PageTiles] = OrderedDict()
        self._tile_bytes = 0
        self._lock = threading.Lock()
        self._source_dir: Path | None = None

    @classmethod
    def from_config(cls, tokenizer: Any, config: Any) -> Idefics3DocumentProcessor:
        """The processor of a model configuration (its tiles, ``image_longest_edge`` and
        ``max_answer_tokens``).

        Raises:
            ValueError: when the tokenizer's ``<image>`` is not the configuration's
                ``image_token_id``, its ``<end_of_utterance>`` not among the text model's
                ``eos_token_id`` or its tokens do not fit the embedding.
        """
        vision = config.vision_config
        processor = cls(
            tokenizer,
            tile_size=vision.image_size,
            image_longest_edge=config.image_longest_edge,
            image_seq_len=image_tokens_per_tile(vision.image_size, vision.patch_size,
                                                config.scale_factor),  # fmt: skip
            max_answer_tokens=config.max_answer_tokens,
        )
        if processor.image_token_id != config.image_token_id:
            raise ValueError(
                f"the tokenizer's {IMAGE_TOKEN} is id {processor.image_token_id}, the model's "
                f"image_token_id is {config.image_token_id}: the tokenizer is not this "
                "checkpoint's (save the model with its processor, save_checkpoint)"
            )
        eos = config.text_config.eos_token_id
        if processor.end_of_utterance_id not in (eos if isinstance(eos, list) else [eos]):
            raise ValueError(
                f"the tokenizer's {END_OF_UTTERANCE} is id {processor.end_of_utterance_id}, the "
                f"model's text_config.eos_token_id is {eos}: answers end with it, so generation "
                "would not stop there (the tokenizer is not this checkpoint's)"
            )
        rows = config.text_config.vocab_size
        if len(processor.tokenizer) > rows:
            raise ValueError(f"the tokenizer has {len(processor.tokenizer)} tokens, the model's "
                             f"embedding {rows} rows")  # fmt: skip
        return processor

    @classmethod
    def read_tokenizer(cls, directory: str | Path) -> Any:
        """The tokenizer the checkpoint directory holds: the kit's T5 one (``spiece.model``) or
        its own ``tokenizer.json`` (SmolVLM's byte-level BPE)."""
        return load_checkpoint_tokenizer(directory)

    @cached_property
    def image_processor(self) -> Any:
        """transformers' tiler with the public checkpoint's settings (LANCZOS, 0.5 / 0.5)."""
        from transformers.models.idefics3.image_processing_pil_idefics3 import (
            Idefics3ImageProcessorPil,
        )

        return Idefics3ImageProcessorPil(
            size={"longest_edge": self.image_longest_edge},
            max_image_size={"longest_edge": self.tile_size},
            image_mean=list(PIXEL_MEAN), image_std=list(PIXEL_STD),
            do_image_splitting=True, do_pad=True,
        )  # fmt: skip

    def _text_ids(self, text: str) -> list[int]:
        """Ids of a piece of text, no end-of-sequence token."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def image_block(self, rows: int, cols: int) -> list[int]:
        """The ids standing for a page cut into ``rows`` x ``cols`` tiles (0 x 0: the global
        view alone), in ``Idefics3Processor.replace_image_token``'s layout."""
        ids = self._ids
        tile = [ids[IMAGE_TOKEN]] * self.image_seq_len
        block: list[int] = []
        for row in range(1, rows + 1):
            for col in range(1, cols + 1):
                block += [ids[FAKE_IMAGE_TOKEN], ids[f"<row_{row}_col_{col}>"], *tile]
            block += self._newline
        if rows:
            block += self._newline
        fake = ids[FAKE_IMAGE_TOKEN]
        return [*block, fake, ids[GLOBAL_IMAGE_TOKEN], *tile, fake]

    def prompt_ids(self, question: str, grid: tuple[int, int] | None) -> list[int]:
        """The chat prompt of a question, with the image block of a ``(rows, cols)`` grid
        (``None``: no image)."""
        image = [] if grid is None else self.image_block(*grid)
        question_ids = self._text_ids(question)[:MAX_QUESTION_TOKENS]
        return [*self._prefix, *image, *question_ids, *self._suffix]

    def answer_ids(self, answer: str) -> list[int]:
        """The trained continuation: the answer (cut to fit) and ``<end_of_utterance>``."""
        kept = self._text_ids(" " + answer)[: self.max_answer_tokens - 1]
        return [*kept, self.end_of_utterance_id]

    def page_grid(self, image_path: str | Path) -> tuple[int, int]:
        """The tile grid a page is cut into, from its size (the file's header only)."""
        from PIL import Image

        key = str(image_path)
        size = self._page_sizes.get(key)
        if size is None:
            if not Path(key).is_file():
                raise FileNotFoundError(f"{key}: page image not found")
            with Image.open(key) as opened:
                size = opened.size
            self._page_sizes[key] = size
        width, height = size
        _, rows, cols = self.image_processor.get_number_of_image_patches(height, width)
        return rows, cols

    def encode_dataset(self, dataset: Any, *, cache_dir: str | Path | None = None,
                       progress: bool = True) -> Any:
        """The dataset with ``n_tokens``: each question's prompt length, image tokens included
        (what the length-grouped batches sort by). Nothing is cached: it reads page headers
        and tokenises questions only."""
        if "n_tokens" in dataset.column_names:
            return dataset
        questions = self.tokenizer(list(dataset["question"]), add_special_tokens=False)["input_ids"]
        blocks: dict[tuple[int, int], int] = {}
        lengths = []
        for question, path in zip(questions, dataset["image_path"], strict=True):
            grid = self.page_grid(path)
            if grid not in blocks:
                blocks[grid] = len(self.image_block(*grid))
            question_length = min(len(question), MAX_QUESTION_TOKENS)
            lengths.append(len(self._prefix) + blocks[grid] + question_length + len(self._suffix))
        return dataset.add_column("n_tokens", lengths)

    def load_image(self, image: Any) -> Any:
        """A page (path or PIL image) as an RGB PIL image (the tiler reads PIL images)."""
        return open_page(image)

    def page_tiles(self, image: Any) -> PageTiles:
        """A page's tiles (8-bit CHW arrays, the global view last) and its ``(rows, cols)`` grid,
        as transformers' ``Idefics3ImageProcessorPil`` cuts it before rescaling; pages given by
        path are kept (:data:`TILE_CACHE_BYTES`)."""
        key = str(image) if isinstance(image, (str, Path)) else None
        if key is not None:
            with self._lock:
                kept = self._tiles.get(key)
                if kept is not None:
                    self._tiles.move_to_end(key)
                    return kept
        cut = self.image_processor(images=[[self.load_image(image)]], do_rescale=False,
                                   do_normalize=False, do_pad=False,
                                   return_row_col_info=True)  # fmt: skip
        page = (tuple(cut["pixel_values"][0]), (int(cut["rows"][0][0]), int(cut["cols"][0][0])))
        if key is not None:
            with self._lock:
                if key not in self._tiles:
                    self._tiles[key] = page
                    self._tile_bytes += sum(tile.nbytes for tile in page[0])
                while self._tile_bytes > TILE_CACHE_BYTES and len(self._tiles) > 1:
                    _, (dropped, _) = self._tiles.popitem(last=False)
                    self._tile_bytes -= sum(tile.nbytes for tile in dropped)
        return page

    def pixels(self, images: Sequence[Any]) -> tuple[dict[str, torch.Tensor], list[Grid]]:
        """``pixel_values`` (batch, most tiles, 3, tile, tile) and ``pixel_attention_mask`` of
        pages, equal to what ``Idefics3ImageProcessorPil`` returns for them (each tile rescaled
        and normalised by its own methods; zero tiles, which the model drops, pad a page with
        fewer tiles), and each page's grid."""
        processor = self.image_processor
        pages = [self.page_tiles(image) for image in images]
        most = max(len(tiles) for tiles, _ in pages)
        size = self.tile_size
        values = torch.zeros((len(pages), most, 3, size, size), dtype=torch.float32)
        mask = torch.zeros((len(pages), most, size, size), dtype=torch.bool)
        for row, (tiles, _) in enumerate(pages):
            for index, tile in enumerate(tiles):
                scaled = processor.rescale(tile, processor.rescale_factor)
                values[row, index] = torch.from_numpy(
                    processor.normalize(scaled, processor.image_mean, processor.image_std))
            mask[row, : len(tiles)] = True
        return {"pixel_values": values, "pixel_attention_mask": mask}, [grid for _, grid in pages]

    def collate(self, features: Sequence[dict[str, Any]], *, with_labels: bool = False,
                with_images: bool | None = None) -> dict[str, torch.Tensor]:
        """A batch of prompts with their pages' tiles, and labels on request.

        Args:
            features: rows with ``question`` and ``image_path`` (and ``answers`` with labels).
            with_labels: append each row's first gold answer to its prompt and return
                ``labels`` (-100 on the prompt and on padding); rows are padded on the right.
                Without labels the prompts are padded on the left, for ``generate``.
            with_images: ``pixel_values`` and ``pixel_attention_mask`` of the pages (default);
                ``False``: prompts without image tokens (the model then reads the question only).

        Returns:
            ``input_ids``, ``attention_mask``, the pixels with images, ``labels`` with labels.
        """
        if not features:
            raise ValueError("collate needs at least one row")
        with_images = self.use_visual if with_images is None else with_images
        batch: dict[str, torch.Tensor] = {}
        grids: list[tuple[int, int] | None] = [None] * len(features)
        if with_images:
            pixels, page_grids = self.pixels([row["image_path"] for row in features])
            batch.update(pixels)
            grids = list(page_grids)
        prompts = [self.prompt_ids(row["question"], grid)
                   for row, grid in zip(features, grids, strict=True)]  # fmt: skip
        if not with_labels:
            batch.update(self._padded(prompts, left=True))
            return batch
        answers = [self.answer_ids(_first_answer(row["answers"])) for row in features]
        sequences = [prompt + answer for prompt, answer in zip(prompts, answers, strict=True)]
        batch.update(self._padded(sequences, left=False))
        labels = torch.full_like(batch["input_ids"], -100)
        for row, (prompt, answer) in enumerate(zip(prompts, answers, strict=True)):
            labels[row, len(prompt): len(prompt) + len(answer)] = torch.tensor(answer)
        batch["labels"] = labels
        return batch

    def _padded(self, sequences: Sequence[list[int]], *, left: bool) -> dict[str, torch.Tensor]:
        """``input_ids`` and ``attention_mask`` of id lists padded to the longest."""
        width = max(map(len, sequences))
        input_ids = torch.full((len(sequences), width), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(sequences), width), dtype=torch.long)
        for row, ids in enumerate(sequences):
            span = slice(width - len(ids), width) if left else slice(0, len(ids))
            input_ids[row, span] = torch.tensor(ids, dtype=torch.long)
            attention_mask[row, span] = 1
        return {"input_ids": input_ids, "attention_mask": attention_mask}

    def decode(self, token_ids: Any) -> list[str]:
        """Answer strings of generated answer ids (special tokens, ids beyond the tokenizer
        and whitespace dropped)."""
        if isinstance(token_ids, torch.Tensor):
            token_ids = token_ids.tolist()
        size = len(self.tokenizer)
        kept = [[token for token in row if 0 <= token < size] for row in token_ids]
        texts = self.tokenizer.batch_decode(kept, skip_special_tokens=True)
        return [text.strip() for text in texts]


def check_image_settings(tile_size: int, image_longest_edge: int) -> None:
    """Refuse tiling settings the model or its grid tokens cannot express.

    Raises:
        ValueError: naming the setting.
    """
    for name, value in (("tile size", tile_size), ("image_longest_edge", image_longest_edge)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if image_longest_edge < tile_size:
        raise ValueError(f"image_longest_edge {image_longest_edge} is smaller than a tile "
                         f"({tile_size} pixels)")  # fmt: skip
    if -(-image_longest_edge // tile_size) > MAX_GRID:
        raise ValueError(
            f"image_longest_edge {image_longest_edge} cuts a page into more than {MAX_GRID} tiles "
            f"of {tile_size} pixels a side; the grid tokens name at most {MAX_GRID} x {MAX_GRID}"
        )


def _first_answer(answers: str | Sequence[str]) -> str:
    """The first gold answer (records hold one string or a list)."""
    return answers if isinstance(answers, str) else (answers[0] if answers else "")
