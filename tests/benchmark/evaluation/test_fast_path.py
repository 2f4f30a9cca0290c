"""The scoring loop's fast path answers like the plain path, one question at a time.

The fast path (`benchmark.evaluation.predict`): length-grouped batches, visual tokens once per
page with images decoded a batch ahead, the encoder's attention over each question's own
positions (`benchmark.model.encoding`), the decoder's cross-attention with the keys and values
folded in and rows that ended leaving the batch (`benchmark.model.decoding`). The plain path:
each question alone, its page image decoded for it, the stock transformers T5 encoder and
`generate`, as the official starter kit scores (at batch size 1).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from transformers.models.t5.modeling_t5 import T5LayerNorm

from benchmark.data import load_split
from benchmark.evaluation import predict
from benchmark.model import load_model, load_processor
from benchmark.model.decoding import t5_layer_norm
from benchmark.model.encoding import encode_each_at_its_length, relative_position_bias

MAX_NEW_TOKENS = 6


@pytest.fixture(scope="module")
def model_and_processor(checkpoint):
    return load_model(checkpoint), load_processor(checkpoint)


def _plain_answer(model, processor, record) -> str:
    """One question through the stock transformers encoder and greedy `generate`."""
    inputs = processor(
        [record["question"]], [record["ocr_tokens"]], [record["ocr_boxes"]],
        images=[record["image_path"]],
    )  # fmt: skip
    with torch.no_grad():
        embeds, mask = model.embed(**inputs)
        output = model.language_backbone.generate(
            inputs_embeds=embeds, attention_mask=mask, max_length=MAX_NEW_TOKENS + 1,
            num_beams=1, do_sample=False,
        )  # fmt: skip
    return processor.decode(output[:, 1:])[0]


@pytest.fixture(scope="module")
def questions(tiny_data):
    return load_split(tiny_data, "val").select(range(30))


@pytest.fixture(scope="module")
def plain_answers(model_and_processor, questions):
    model, processor = model_and_processor
    answers = [_plain_answer(model, processor, record) for record in questions]
    assert len(set(answers)) > 1, "answers should differ between pages"
    assert len(set(questions["image_path"])) < len(questions), "pages should have several questions"
    return answers


@pytest.mark.parametrize("threads", [1, 2])
def test_the_fast_path_answers_like_the_plain_path(
    model_and_processor, questions, plain_answers, tmp_path, threads
):
    model, processor = model_and_processor
    previous = torch.get_num_threads()
    try:
        torch.set_num_threads(threads)  # 2: two batches side by side, one thread each
        fast = predict(model, processor, questions, batch_size=7, max_new_tokens=MAX_NEW_TOKENS,
                       cache_dir=tmp_path, progress=False)  # fmt: skip
    finally:
        torch.set_num_threads(previous)
    assert fast == plain_answers


def test_each_question_attends_over_its_own_positions_only(model_and_processor, tiny_data):
    model, processor = model_and_processor
    records = load_split(tiny_data, "val").select(range(5))
    inputs = processor(records["question"], records["ocr_tokens"], records["ocr_boxes"],
                       images=records["image_path"], pad_to=300)  # fmt: skip
    encoder = model.language_backbone.encoder
    with torch.inference_mode():
        embeds, mask = model.embed(**inputs)
        stock = encoder(inputs_embeds=embeds, attention_mask=mask).last_hidden_state
        ours = encode_each_at_its_length(encoder, embeds, mask)
        # and a question alone, unpadded, is encoded as within its padded batch
        n = int(mask[2].sum())
        alone = encode_each_at_its_length(encoder, embeds[2:3, :n], mask[2:3, :n])
    real = mask.bool()
    assert not real.all(), "the batch should have padding"
    torch.testing.assert_close(ours[real], stock[real])
    assert torch.equal(alone[0], ours[2, :n])


def test_the_shortcuts_compute_the_stock_values(model_and_processor):
    model, _ = model_and_processor
    attention = model.language_backbone.encoder.block[0].layer[0].SelfAttention
    for length in (1, 7, 300):
        expected = attention.compute_bias(length, length).contiguous()
        assert torch.equal(relative_position_bias(attention, length, device=torch.device("cpu")), expected)
    norm = T5LayerNorm(64, eps=1e-6)
    with torch.no_grad():
        norm.weight.normal_()
    for shape in ((3, 1, 64), (512, 64)):
        hidden = torch.randn(*shape)
        assert torch.equal(t5_layer_norm(norm, hidden), norm(hidden))
        assert torch.equal(F.rms_norm(hidden, (64,), norm.weight, 1e-6), norm(hidden))
