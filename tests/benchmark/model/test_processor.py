"""VT5Processor: the reference input construction, caching and collation."""

from __future__ import annotations

import datasets
import numpy as np
import pytest
import torch

from benchmark.model import PROMPT_BOX, VT5Processor, length_grouped_batches, load_tokenizer


def reference_inputs(tokenizer, question, words, boxes, *, max_tokens, scale):
    """The public VT5 code's construction, one tokenizer call per word (the specification)."""
    ids = tokenizer(f"question: {question}  context: ").input_ids[:-1]
    token_boxes = [list(PROMPT_BOX)] * len(ids)
    for word, box in zip(words, boxes, strict=True):
        pieces = tokenizer(word).input_ids[:-1]
        ids.extend(pieces)
        token_boxes.extend([[int(c * scale) for c in box]] * len(pieces))
    ids = ids[: max_tokens - 1] + [tokenizer.eos_token_id]
    token_boxes = token_boxes[: max_tokens - 1] + [[0, 0, 0, 0]]
    return ids, token_boxes


@pytest.mark.parametrize("max_tokens", [512, 40])
def test_inputs_match_the_reference_construction(processor, records, max_tokens):
    proc = VT5Processor(processor.tokenizer, max_input_tokens=max_tokens, box_scale=1000)
    batch = records[:8]
    encoded = proc.encode_batch(
        [r["question"] for r in batch], [r["ocr_tokens"] for r in batch], [r["ocr_boxes"] for r in batch]
    )
    for row, record in enumerate(batch):
        ids, boxes = reference_inputs(
            proc.tokenizer, record["question"], record["ocr_tokens"], record["ocr_boxes"],
            max_tokens=max_tokens, scale=1000,
        )
        assert encoded["input_ids"][row] == ids
        assert np.asarray(encoded["input_boxes"][row]).reshape(-1, 4).tolist() == boxes
        assert encoded["n_tokens"][row] == len(ids) <= max_tokens
        assert ids[-1] == proc.tokenizer.eos_token_id
    if max_tokens == 40:
        assert all(n == 40 for n in encoded["n_tokens"])


def test_every_ocr_subtoken_repeats_its_word_box(processor):
    words = ["INV-20231", "Total"]
    boxes = [[0.1, 0.2, 0.3, 0.25], [0.5, 0.6, 0.55, 0.65]]
    encoded = processor.encode_batch(["What?"], [words], [boxes])
    ids = encoded["input_ids"][0]
    flat = np.asarray(encoded["input_boxes"][0]).reshape(-1, 4)
    prompt_len = len(processor.tokenizer("question: What?  context: ").input_ids) - 1
    assert (flat[:prompt_len] == PROMPT_BOX).all()
    first = len(processor.tokenizer(words[0], add_special_tokens=False).input_ids)
    assert first > 1, "the test word must split into several pieces"
    assert (flat[prompt_len : prompt_len + first] == [100, 200, 300, 250]).all()
    assert (flat[prompt_len + first : -1] == [500, 600, 550, 650]).all()
    assert flat[-1].tolist() == [0, 0, 0, 0] and ids[-1] == processor.eos_token_id


def test_a_repeated_word_keeps_the_box_of_each_occurrence(processor):
    """Words are tokenised once per batch; each occurrence still gets its own box."""
    words = ["Total", "INV-20231", "Total"]
    boxes = [[0.1, 0.1, 0.2, 0.2], [0.3, 0.3, 0.4, 0.4], [0.7, 0.7, 0.8, 0.8]]
    encoded = processor.encode_batch(["What?", "Why?"], [words, words[::-1]], [boxes, boxes[::-1]])
    for row, (page_words, page_boxes) in enumerate([(words, boxes), (words[::-1], boxes[::-1])]):
        question = ["What?", "Why?"][row]
        ids, token_boxes = reference_inputs(
            processor.tokenizer, question, page_words, page_boxes, max_tokens=512, scale=1000
        )
        assert encoded["input_ids"][row] == ids
        assert np.asarray(encoded["input_boxes"][row]).reshape(-1, 4).tolist() == token_boxes


def test_box_scale_one_reproduces_the_public_checkpoint_buckets(processor):
    proc = VT5Processor(processor.tokenizer, box_scale=1.0)
    encoded = proc.encode_batch(["q"], [["a", "b"]], [[[0.2, 0.3, 0.9, 1.0], [0, 0, 1, 1]]])
    flat = np.asarray(encoded["input_boxes"][0]).reshape(-1, 4)
    assert set(flat[:-1].ravel().tolist()) <= {0, 1, 1000}
    assert [0, 0, 0, 1] in flat.tolist() and [0, 0, 1, 1] in flat.tolist()


def test_labels_are_whole_answers_by_default_as_the_public_code_trains(processor):
    proc = VT5Processor(processor.tokenizer, max_answer_tokens=4)
    answer = "INV-12345 long answer text"
    whole = processor.tokenizer(answer).input_ids
    assert len(whole) > 4
    labels = proc.labels_tensor([answer, "a"])
    assert labels[0].tolist() == whole
    rows = [{"input_ids": [5, 1], "input_boxes": [0] * 8, "answers": [answer]}]
    assert proc.collate(rows, with_labels=True, with_images=False)["labels"][0].tolist() == whole
    assert proc.labels_tensor([answer], max_tokens=4).shape[1] == 4


def test_labels_use_the_first_answer_and_keep_eos_when_cut(processor):
    proc = VT5Processor(processor.tokenizer, max_label_tokens=4)
    labels = proc.labels_tensor(["INV-12345 long answer text", "a"])
    assert labels.shape[1] == 4
    assert labels[0, -1].item() == proc.eos_token_id
    assert (labels[1] == -100).sum() == 4 - len(proc.tokenizer("a").input_ids)
    rows = [{"input_ids": [5, 1], "input_boxes": [0] * 8, "answers": ["x", "y"]}]
    collated = proc.collate(rows, with_labels=True, with_images=False)
    assert collated["labels"][0].tolist() == proc.tokenizer("x").input_ids


def test_collate_pads_ids_boxes_mask_and_loads_images(processor, records):
    encoded = processor.encode_batch(
        [r["question"] for r in records[:3]],
        [r["ocr_tokens"][: 3 + 5 * i] for i, r in enumerate(records[:3])],
        [r["ocr_boxes"][: 3 + 5 * i] for i, r in enumerate(records[:3])],
    )
    rows = [
        {"input_ids": ids, "input_boxes": flat, "image_path": r["image_path"]}
        for ids, flat, r in zip(encoded["input_ids"], encoded["input_boxes"], records, strict=False)
    ]
    batch = processor.collate(rows)
    longest = max(encoded["n_tokens"])
    assert batch["input_ids"].shape == (3, longest)
    assert batch["boxes"].shape == (3, longest, 4)
    assert batch["attention_mask"].sum(1).tolist() == encoded["n_tokens"]
    assert (batch["input_ids"][batch["attention_mask"] == 0] == processor.pad_token_id).all()
    assert batch["pixel_values"].shape == (3, 3, 224, 224)
    assert -1.0 <= batch["pixel_values"].min() and batch["pixel_values"].max() <= 1.0
    assert batch["pixel_values"].std() > 0.05
    padded = processor.collate(rows, pad_to=512, with_images=False)
    assert padded["input_ids"].shape == (3, 512) and "pixel_values" not in padded


def test_missing_image_gives_a_clear_error(processor, tmp_path):
    with pytest.raises(FileNotFoundError, match="page image not found"):
        processor.load_image(tmp_path / "nope.jpg")


def test_encode_dataset_caches_on_disk_and_matches_encode_batch(processor, records, tmp_path):
    dataset = datasets.Dataset.from_list(records)
    first = processor.encode_dataset(dataset, cache_dir=tmp_path, progress=False)
    cache_files = list(tmp_path.glob("vt5-inputs-*.arrow"))
    assert len(cache_files) == 1
    mtime = cache_files[0].stat().st_mtime_ns
    again = processor.encode_dataset(dataset, cache_dir=tmp_path, progress=False)
    assert cache_files[0].stat().st_mtime_ns == mtime
    assert again["input_ids"] == first["input_ids"]
    direct = processor.encode_batch(
        [r["question"] for r in records], [r["ocr_tokens"] for r in records],
        [r["ocr_boxes"] for r in records],
    )
    assert first["input_ids"] == direct["input_ids"]
    assert first["n_tokens"] == direct["n_tokens"]
    other = VT5Processor(processor.tokenizer, box_scale=1.0)
    other.encode_dataset(dataset, cache_dir=tmp_path, progress=False)
    assert len(list(tmp_path.glob("vt5-inputs-*.arrow"))) == 2


def test_length_grouped_batches_cover_every_row_once():
    lengths = [5, 100, 7, 99, 50, 51, 3, 98]
    batches = length_grouped_batches(lengths, 3)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert [lengths[i] for i in batches[0]] == [100, 99, 98]
    capped = length_grouped_batches(lengths, 8, max_batch_tokens=200)
    assert all(len(b) * max(lengths[i] for i in b) <= 200 or len(b) == 1 for b in capped)
    shuffled = length_grouped_batches(lengths, 3, seed=1)
    assert sorted(map(tuple, shuffled)) == sorted(map(tuple, batches))
    with pytest.raises(ValueError):
        length_grouped_batches(lengths, 0)


def test_call_builds_model_inputs_from_raw_records(processor, records):
    batch = processor(
        [r["question"] for r in records[:2]],
        [r["ocr_tokens"] for r in records[:2]],
        [r["ocr_boxes"] for r in records[:2]],
        images=[r["image_path"] for r in records[:2]],
        answers=[r["answers"][0] for r in records[:2]],
    )
    assert set(batch) == {"input_ids", "boxes", "attention_mask", "labels", "pixel_values"}
    assert batch["boxes"].dtype == torch.long
    assert processor.decode(batch["labels"].clamp(min=0)) == [r["answers"][0] for r in records[:2]]


def test_saved_tokenizer_reloads_identically(processor, tmp_path):
    processor.save_pretrained(tmp_path)
    assert (tmp_path / "spiece.model").is_file() and (tmp_path / "tokenizer.json").is_file()
    reloaded = load_tokenizer(tmp_path)
    text = "question: What is the total amount?  context: 1234.50 EUR"
    assert reloaded(text).input_ids == processor.tokenizer(text).input_ids


def test_lowercasing_is_a_recorded_setting_that_spares_the_question(processor, records):
    record = records[0]
    lowered = VT5Processor(processor.tokenizer, lowercase_text=True)
    kept = VT5Processor(processor.tokenizer)
    encoded = lowered.encode_batch([record["question"]], [record["ocr_tokens"]], [record["ocr_boxes"]])
    by_hand = kept.encode_batch([record["question"]], [[w.lower() for w in record["ocr_tokens"]]],
                                [record["ocr_boxes"]])
    assert encoded == by_hand
    assert encoded != kept.encode_batch([record["question"]], [record["ocr_tokens"]],
                                        [record["ocr_boxes"]])
    prompt = processor.tokenizer(f"question: {record['question']}  context: ").input_ids[:-1]
    assert encoded["input_ids"][0][: len(prompt)] == prompt  # the question keeps its case
    assert lowered.encode_answers(["INV-12 EUR"]) == kept.encode_answers(["inv-12 eur"])
    assert lowered.signature != kept.signature


def test_the_resize_filter_is_a_recorded_setting(processor, records):
    from PIL import Image

    path = records[0]["image_path"]
    bilinear = VT5Processor(processor.tokenizer, image_resample="bilinear", image_size=64)
    bicubic = VT5Processor(processor.tokenizer, image_resample="bicubic", image_size=64)
    with Image.open(path) as page:
        expected = page.convert("RGB").resize((64, 64), Image.Resampling.BILINEAR)
    pixels = (torch.from_numpy(np.asarray(expected, dtype=np.float32)).permute(2, 0, 1) / 255 - 0.5) / 0.5
    torch.testing.assert_close(bilinear.load_image(path), pixels)
    assert not torch.equal(bilinear.load_image(path), bicubic.load_image(path))
    with pytest.raises(ValueError, match="image_resample is 'cubic'"):
        VT5Processor(processor.tokenizer, image_resample="cubic")


def test_boxes_are_truncated_from_float64_not_rounded_through_float32(processor):
    proc = VT5Processor(processor.tokenizer, box_scale=1.0)
    encoded = proc.encode_batch(["q"], [["x"]], [[[0.99999999, 0.5, 0.999999999, 1.0]]])
    first_word = len(encoded["input_ids"][0]) - 2
    assert encoded["input_boxes"][0][4 * first_word: 4 * first_word + 4] == [0, 0, 0, 1]
