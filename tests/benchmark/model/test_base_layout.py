"""The real vt5-base shape (T5-base + DiT-base) saves, validates, reloads and runs.

This is what makes a locally available `vt5-base-spdocvqa`-shaped checkpoint usable with the same
code: the real sizes and state-dict layout, the public loading path, a forward pass and greedy
generation on real-layout records. Weights are random (nothing is downloaded).
"""

from __future__ import annotations

import gc
import json

import torch

from benchmark.model import (
    VT5ForConditionalGeneration,
    VT5Processor,
    base_vt5_config,
    expected_tensor_spec,
    load_model,
    load_processor,
    save_checkpoint,
)


def _random_base_model(config) -> VT5ForConditionalGeneration:
    """Random weights without transformers' slow per-module initialisation."""
    with torch.device("meta"):
        model = VT5ForConditionalGeneration(config)
    model = model.to_empty(device="cpu")
    model.tie_weights()  # to_empty gives every alias its own storage
    backbone = model.language_backbone
    assert backbone.encoder.embed_tokens.weight is backbone.shared.weight
    assert backbone.lm_head.weight is not backbone.shared.weight  # the public code's own head
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name.lower():
                parameter.fill_(1.0 if name.endswith("weight") else 0.0)
            else:
                parameter.normal_(0.0, 0.02, generator=generator)
        for _, buffer in model.named_buffers():
            buffer.zero_()
    return model.eval()


def test_base_sized_model_round_trips_through_the_public_loading_path(
    tmp_path, processor, records
):
    config = base_vt5_config(vocab_size=32128, box_scale=1.0)
    spec = expected_tensor_spec(config)
    assert spec["language_backbone.shared.weight"] == ((32128, 768), "F32")
    assert spec["spatial_embedding.x_position_embeddings.weight"] == ((1024, 768), "F32")
    assert spec["spatial_embedding.spatial_emb_matcher.layers.0.weight"] == ((768, 768), "F32")
    assert spec["visual_embedding.visual_emb_matcher.layers.0.weight"] == ((768, 768), "F32")
    assert spec["visual_embedding.image_model.embeddings.position_embeddings"] == ((1, 197, 768), "F32")
    assert "visual_embedding.image_model.encoder.layer.11.attention.attention.query.weight" in spec
    assert "language_backbone.decoder.block.11.layer.2.DenseReluDense.wo.weight" in spec
    n_params = sum(shape.numel() if hasattr(shape, "numel") else torch.Size(shape).numel()
                   for shape, _ in spec.values())
    # 311,467,776 values with one embedding, plus the public code's own lm_head (32128 x 768)
    assert n_params == 336_142_080 == 311_467_776 + 32128 * 768

    model = _random_base_model(config)
    base_processor = VT5Processor.from_config(processor.tokenizer, config).with_spiece_model(
        processor._source_dir
    )
    directory = save_checkpoint(model, base_processor, tmp_path / "vt5-base")
    batch = base_processor(
        [r["question"] for r in records[:2]],
        [r["ocr_tokens"] for r in records[:2]],
        [r["ocr_boxes"] for r in records[:2]],
        images=[r["image_path"] for r in records[:2]],
    )
    with torch.inference_mode():
        expected = model(**batch).logits
    del model
    gc.collect()

    assert json.loads((directory / "config.json").read_text())["language_config"]["d_model"] == 768
    reloaded = load_model(directory)
    reloaded_processor = load_processor(directory)
    assert reloaded_processor.box_scale == 1.0
    assert sum(p.numel() for p in reloaded.parameters()) == n_params
    batch_again = reloaded_processor(
        [r["question"] for r in records[:2]],
        [r["ocr_tokens"] for r in records[:2]],
        [r["ocr_boxes"] for r in records[:2]],
        images=[r["image_path"] for r in records[:2]],
    )
    assert torch.equal(batch_again["boxes"], batch["boxes"])
    with torch.inference_mode():
        out = reloaded(**batch_again)
        answers = reloaded.generate(**batch_again, max_new_tokens=3)
    assert out.encoder_last_hidden_state.shape == (2, batch["input_ids"].shape[1] + 197, 768)
    torch.testing.assert_close(out.logits, expected)
    assert answers.shape[0] == 2 and 1 <= answers.shape[1] <= 3
    assert len(reloaded_processor.decode(answers)) == 2
