"""The tiny VT5: layout of the state dict, forward, loss, training signal and greedy generation."""

from __future__ import annotations

import pytest
import torch

from benchmark.model import VT5ForConditionalGeneration, tiny_vt5_config


def _narrow_config(processor):
    """The tiny layout, narrower and shallower, for tests that run the model many times."""
    return tiny_vt5_config(
        len(processor.tokenizer),
        language_config={"d_model": 64, "d_ff": 128, "num_layers": 1, "num_decoder_layers": 1,
                         "num_heads": 2},
        visual_config={"hidden_size": 32, "intermediate_size": 64},
    )


def _batch(processor, records, n=4, **kwargs):
    chosen = records[:n]
    return processor(
        [r["question"] for r in chosen],
        [r["ocr_tokens"] for r in chosen],
        [r["ocr_boxes"] for r in chosen],
        images=[r["image_path"] for r in chosen],
        answers=[r["answers"][0] for r in chosen],
        **kwargs,
    )


def test_state_dict_has_the_reference_prefixes(tiny_model):
    names = list(tiny_model.state_dict())
    prefixes = {
        "language_backbone.",
        "spatial_embedding.",
        "visual_embedding.image_model.",
        "visual_embedding.visual_emb_matcher.",
    }
    assert all(any(n.startswith(p) for p in prefixes) for n in names)
    assert all(any(n.startswith(p) for n in names) for p in prefixes)
    spatial = {n for n in names if n.startswith("spatial_embedding.")}
    assert spatial == {
        "spatial_embedding.x_position_embeddings.weight",
        "spatial_embedding.y_position_embeddings.weight",
        "spatial_embedding.LayerNorm.weight",
        "spatial_embedding.LayerNorm.bias",
        "spatial_embedding.spatial_emb_matcher.layers.0.weight",
        "spatial_embedding.spatial_emb_matcher.layers.0.bias",
    }
    state = tiny_model.state_dict()
    assert state["spatial_embedding.x_position_embeddings.weight"].shape == (1024, 32)
    assert state["visual_embedding.visual_emb_matcher.layers.0.weight"].shape == (256, 96)
    backbone = tiny_model.language_backbone
    assert backbone.lm_head.weight is backbone.shared.weight
    assert backbone.encoder.embed_tokens.weight is backbone.shared.weight


def test_forward_returns_loss_and_logits_over_the_answer(tiny_model, processor, records):
    batch = _batch(processor, records)
    out = tiny_model(**batch)
    assert out.logits.shape == (*batch["labels"].shape, tiny_model.config.vocab_size)
    assert torch.isfinite(out.loss) and out.loss.item() > 0
    # the encoder saw the text tokens followed by the 197 visual tokens
    assert out.encoder_last_hidden_state.shape[1] == batch["input_ids"].shape[1] + 197


def test_embedding_is_tokens_plus_boxes_then_visual_tokens(tiny_model, processor, records):
    batch = _batch(processor, records, n=2)
    batch["attention_mask"][1, -5:] = 0  # a right-padded row: its visual tokens move up
    embeds, mask = tiny_model.embed(
        batch["input_ids"], batch["boxes"], batch["attention_mask"], batch["pixel_values"]
    )
    text = tiny_model.language_backbone.shared(batch["input_ids"]) + tiny_model.spatial_embedding(
        batch["boxes"]
    )
    visual = tiny_model.embed_images(batch["pixel_values"])
    for row, length in enumerate(batch["attention_mask"].sum(1).tolist()):
        torch.testing.assert_close(embeds[row, :length], text[row, :length])
        torch.testing.assert_close(embeds[row, length : length + 197], visual[row])
        assert mask[row].tolist() == [1] * (length + 197) + [0] * (mask.shape[1] - length - 197)
    moved = batch["boxes"].clone()
    moved[:, :, 0] = 0
    assert not torch.allclose(tiny_model.spatial_embedding(moved), tiny_model.spatial_embedding(batch["boxes"]))


def test_padding_does_not_change_the_answer_logits(tiny_model, processor, records):
    batch = _batch(processor, records, n=2)
    padded = _batch(processor, records, n=2, pad_to=200)
    with torch.inference_mode():
        short = tiny_model(**batch).logits
        long = tiny_model(**padded).logits
    torch.testing.assert_close(short, long, atol=2e-4, rtol=1e-4)


def test_a_few_training_steps_fit_a_batch(processor, records):
    torch.manual_seed(1)
    model = VT5ForConditionalGeneration(_narrow_config(processor))
    model.freeze_visual_encoder()
    model.train()
    batch = _batch(processor, records, n=4)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3)
    losses = []
    for _ in range(8):
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < 0.6 * losses[0]
    assert model.visual_embedding.image_model.embeddings.cls_token.grad is None
    assert model.spatial_embedding.x_position_embeddings.weight.requires_grad


def test_greedy_generation_matches_transformers_generate(tiny_model, processor, records):
    batch = _batch(processor, records, n=3)
    del batch["labels"]
    with torch.inference_mode():
        ours = tiny_model.generate(**batch, max_new_tokens=12)
        embeds, mask = tiny_model.embed(**batch)
        reference = tiny_model.language_backbone.generate(
            inputs_embeds=embeds, attention_mask=mask, max_length=13, num_beams=1, do_sample=False
        )
    assert ours.shape[0] == 3 and ours.shape[1] <= 12
    assert ours.tolist() == reference[:, 1:].tolist()
    assert all(isinstance(text, str) for text in processor.decode(ours))


def test_generation_stops_at_eos_and_is_bounded(processor, records):
    torch.manual_seed(2)
    model = VT5ForConditionalGeneration(tiny_vt5_config(len(processor.tokenizer))).eval()
    with torch.no_grad():
        model.language_backbone.lm_head.weight.zero_()  # tied: every logit 0 -> argmax is id 0
        bias = torch.zeros(model.config.vocab_size)
        bias[processor.eos_token_id] = 1.0
    model.language_backbone.lm_head.register_forward_hook(lambda m, i, o: o + bias)
    batch = _batch(processor, records, n=2)
    del batch["labels"]
    out = model.generate(**batch, max_new_tokens=7)
    assert out.tolist() == [[processor.eos_token_id]] * 2
    assert model.config.max_answer_tokens == 20


def test_text_only_model_needs_no_image(processor, records):
    model = VT5ForConditionalGeneration(
        tiny_vt5_config(len(processor.tokenizer), use_visual=False)
    ).eval()
    batch = _batch(processor, records, n=2)
    del batch["pixel_values"]
    out = model(**batch)
    assert out.encoder_last_hidden_state.shape[1] == batch["input_ids"].shape[1]
    image_model = VT5ForConditionalGeneration(tiny_vt5_config(len(processor.tokenizer)))
    with pytest.raises(ValueError, match="pixel_values or visual_embeds"):
        image_model(**batch)


def test_rows_that_finish_early_leave_the_batch_without_changing_answers(processor, records):
    torch.manual_seed(3)
    model = VT5ForConditionalGeneration(_narrow_config(processor)).eval()
    eos = processor.eos_token_id
    with torch.no_grad():  # sharp cross-attention: untrained answers then differ between pages
        for block in model.language_backbone.decoder.block:
            block.layer[1].EncDecAttention.q.weight.mul_(10.0)
            block.layer[1].EncDecAttention.o.weight.mul_(10.0)

    def end_on_some_tokens(module, inputs, logits):
        # per-row rule (independent of the batch): EOS wins when the best token id is divisible by 3
        best = logits.max(dim=-1)
        ends = best.indices % 3 == 0
        logits = logits.clone()
        logits[..., eos] = torch.where(ends, best.values + 1.0, logits[..., eos])
        return logits

    model.language_backbone.lm_head.register_forward_hook(end_on_some_tokens)
    batch = _batch(processor, records, n=24)
    del batch["labels"]
    with torch.inference_mode():
        ours = model.generate(**batch, max_new_tokens=15)
        embeds, mask = model.embed(**batch)
        reference = model.language_backbone.generate(
            inputs_embeds=embeds, attention_mask=mask, max_length=16, num_beams=1, do_sample=False
        )
    lengths = [(row.tolist() + [eos]).index(eos) + 1 for row in ours]
    assert len(set(lengths)) > 1, "the rule should end answers at different steps"
    assert ours.tolist() == reference[:, 1:].tolist()


def test_encoder_with_shared_bias_matches_the_stock_t5_encoder(tiny_model, processor, records):
    batch = _batch(processor, records, n=3)
    batch["attention_mask"][0, -7:] = 0
    del batch["labels"]
    with torch.inference_mode():
        embeds, mask = tiny_model.embed(**batch)
        stock = tiny_model.language_backbone.encoder(inputs_embeds=embeds, attention_mask=mask)
        ours, ours_mask = tiny_model.encode(**batch)
    assert torch.equal(mask, ours_mask)
    real = mask.bool()
    torch.testing.assert_close(ours.last_hidden_state[real], stock.last_hidden_state[real])
