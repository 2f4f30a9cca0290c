"""A SmolVLM checkpoint in the hub's layout (``HuggingFaceTB/SmolVLM-256M-Instruct``) as a kit one.

The hub's directory holds ``config.json`` (model_type ``idefics3``), the weights
(``model.safetensors``, bfloat16 on the hub), SmolVLM's own byte-level BPE tokenizer
(``tokenizer.json`` and ``tokenizer_config.json``, with ``<image>``, ``<fake_token_around_image>``,
``<global-img>``, ``<row_R_col_C>`` and ``<end_of_utterance>`` in its vocabulary),
``preprocessor_config.json`` (the page's ``size``: its longest edge before tiling; the tile,
``max_image_size``; the normalisation and resampling) and ``processor_config.json`` (its
``image_seq_len``). The kit's directory is the same with the input settings in ``config.json``
(``image_longest_edge``, ``max_answer_tokens``), the text model's ``eos_token_id`` set to the
tokenizer's ``<end_of_utterance>`` (the kit's answers end with it), every tensor in fp32, the
tokenizer files copied as they are, and everything checked before the directory appears: the
template's tokens looked up by their text against ``image_token_id``, the weights against the
configuration's tensor specification (:func:`benchmark.model.hub_checkpoint.write_converted_checkpoint`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchmark.model.families.idefics3 import BASE_LONGEST_EDGE, MAX_ANSWER_TOKENS, Idefics3
from benchmark.model.hub_checkpoint import (
    read_fp32_weights,
    read_hub_config,
    read_hub_json,
    record_fp32,
    write_converted_checkpoint,
)
from benchmark.model.safetensors_header import CheckpointError

PREPROCESSOR_NAME = "preprocessor_config.json"
PROCESSOR_NAME = "processor_config.json"
#: PIL's LANCZOS, the resampling filter of SmolVLM's image processor (and the kit's).
LANCZOS = 1


def convert_hub_checkpoint(source: str | Path, target: str | Path) -> list[str]:
    """Write the kit's checkpoint directory of a hub-layout SmolVLM (Idefics3) directory.

    Args:
        source: the hub's directory (``save_pretrained`` of an ``Idefics3ForConditionalGeneration``
            with its processor).
        target: the directory to write (must not exist).

    Returns:
        What was done, one line each.

    Raises:
        FileExistsError: if ``target`` exists.
        CheckpointError: naming the file, for a missing or foreign config, a tokenizer without
            the template's tokens or whose ids are not the configuration's, image settings the
            kit's processor does not reproduce, or weights that do not match the configuration.
    """
    from benchmark.model.families.idefics3.processing import (
        CHAT_TOKENS,
        END_OF_UTTERANCE,
        Idefics3DocumentProcessor,
        image_tokens_per_tile,
    )
    from benchmark.model.tokenizer import load_checkpoint_tokenizer

    source, target = Path(source), Path(target)
    config_path, raw = read_hub_config(source, target, Idefics3.name)
    try:
        tokenizer = load_checkpoint_tokenizer(source)
    except (FileNotFoundError, ValueError) as error:
        raise CheckpointError(str(error)) from None
    vocabulary = tokenizer.get_vocab()
    missing = [token for token in CHAT_TOKENS if token not in vocabulary]
    if missing:
        raise CheckpointError(
            f"{source}: the tokenizer lacks {', '.join(missing[:4])}"
            + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
            + " (SmolVLM's tokenizer.json has every token of its chat template)"
        )
    longest_edge, tile, image_source = _image_settings(source)
    record_fp32(raw)
    raw["image_longest_edge"] = longest_edge
    raw.setdefault("max_answer_tokens", MAX_ANSWER_TOKENS)
    text = dict(raw.get("text_config") or {})
    eos_before = text.get("eos_token_id")
    text["eos_token_id"] = vocabulary[END_OF_UTTERANCE]
    if text.get("pad_token_id") is None:
        text["pad_token_id"] = tokenizer.pad_token_id
    raw["text_config"] = text
    config = Idefics3.config_of(config_path, raw)
    vision = config.vision_config
    if tile is not None and tile != vision.image_size:
        raise CheckpointError(
            f"{source / PREPROCESSOR_NAME}: max_image_size cuts {tile}-pixel tiles but the vision "
            f"encoder reads {vision.image_size}-pixel ones ({config_path})"
        )
    seq_len = image_tokens_per_tile(vision.image_size, vision.patch_size, config.scale_factor)
    _check_image_seq_len(source, seq_len)
    try:
        processor = Idefics3DocumentProcessor.from_config(tokenizer, config)
    except ValueError as error:
        raise CheckpointError(f"{source}: {error}") from None
    state_dict, report = read_fp32_weights(source)
    write_converted_checkpoint(source, target, Idefics3, config, state_dict)
    return [
        *report,
        f"tokenizer: {type(tokenizer).__name__} of {_tokenizer_file(source)}, "
        f"{len(tokenizer)} tokens; <image> {processor.image_token_id}, "
        f"{END_OF_UTTERANCE} {processor.end_of_utterance_id}, padding {processor.pad_token_id}",
        f"image_longest_edge: {longest_edge} ({image_source}); {vision.image_size}-pixel tiles, "
        f"{seq_len} image tokens each",
        f"text_config.eos_token_id: {processor.end_of_utterance_id} ({END_OF_UTTERANCE}, the "
        f"end of an answer; was {eos_before})",
        f"max_answer_tokens: {config.max_answer_tokens}",
    ]


def _tokenizer_file(source: Path) -> str:
    """Which tokenizer file the conversion read (for the report)."""
    from benchmark.model.tokenizer import SPIECE_NAME, TOKENIZER_JSON_NAME

    return SPIECE_NAME if (source / SPIECE_NAME).is_file() else TOKENIZER_JSON_NAME


def _longest_edge(value: Any, path: Path, key: str) -> int:
    """A ``{"longest_edge": N}`` setting's N (a positive integer), naming the file."""
    edge = value.get("longest_edge") if isinstance(value, Mapping) else None
    if not isinstance(edge, int) or isinstance(edge, bool) or edge < 1:
        raise CheckpointError(f"{path}: {key} must be {{\"longest_edge\": a positive integer}}, "
                              f"got {value!r}")  # fmt: skip
    return edge


def _image_settings(source: Path) -> tuple[int, int | None, str]:
    """The page's longest edge and the tile (``None``: not stated) of the hub's
    ``preprocessor_config.json``, else the public checkpoint's edge; and where they came from.

    Raises:
        CheckpointError: for settings the kit's processor does not reproduce (no tiling, a
            normalisation other than 0.5 / 0.5, a filter other than LANCZOS).
    """
    from benchmark.model.families.idefics3.processing import PIXEL_MEAN, PIXEL_STD

    path = source / PREPROCESSOR_NAME
    if not path.is_file():
        return BASE_LONGEST_EDGE, None, f"no {PREPROCESSOR_NAME}: the public checkpoint's"
    raw = read_hub_json(path)
    if raw.get("do_image_splitting") is False:
        raise CheckpointError(f"{path}: do_image_splitting is false; the kit's processor cuts "
                              "every page into tiles, as SmolVLM's does")  # fmt: skip
    for key, kit in (("image_mean", PIXEL_MEAN), ("image_std", PIXEL_STD)):
        value = raw.get(key, list(kit))
        if not _same_numbers(value, kit):
            raise CheckpointError(f"{path}: {key} is {value!r}; the kit's processor normalises "
                                  f"with {list(kit)} (SmolVLM's)")  # fmt: skip
    if raw.get("resample", LANCZOS) != LANCZOS:
        raise CheckpointError(f"{path}: resample is {raw.get('resample')!r}; the kit's processor "
                              f"resizes with LANCZOS ({LANCZOS}, SmolVLM's)")  # fmt: skip
    tile = (_longest_edge(raw["max_image_size"], path, "max_image_size")
            if "max_image_size" in raw else None)  # fmt: skip
    if "size" not in raw:
        return BASE_LONGEST_EDGE, tile, f"{PREPROCESSOR_NAME} has no size: the public checkpoint's"
    return _longest_edge(raw["size"], path, "size"), tile, PREPROCESSOR_NAME


def _same_numbers(value: Any, expected: tuple[float, ...]) -> bool:
    """Whether a JSON value is a list of the expected numbers."""
    return (isinstance(value, list) and len(value) == len(expected)
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) and float(x) == y
                    for x, y in zip(value, expected, strict=True)))  # fmt: skip


def _check_image_seq_len(source: Path, seq_len: int) -> None:
    """Refuse a ``processor_config.json`` whose ``image_seq_len`` is not the configuration's."""
    path = source / PROCESSOR_NAME
    if not path.is_file():
        return
    stated = read_hub_json(path).get("image_seq_len", seq_len)
    if stated != seq_len:
        raise CheckpointError(f"{path}: image_seq_len is {stated!r}, but the configuration's "
                              f"tiles make {seq_len} image tokens each")  # fmt: skip
