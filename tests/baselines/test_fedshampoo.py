"""FedShampoo: the token embedding is frozen and never sent; what that saves per message on the
real VT5-base shape (a count on a meta-device model, no training)."""

from __future__ import annotations

import torch

from baselines.methods.fedshampoo import TOKEN_EMBEDDING, FedShampoo
from baselines.methods.full import FullFineTuning
from baselines.parameters import select_communicated
from benchmark.communication_log import official_logger_bytes
from benchmark.model import VT5ForConditionalGeneration
from benchmark.model.presets import base_vt5_config


def _communicated(method, config) -> dict[str, int]:
    """Values per trainable tensor, each Parameter once (meta device: shapes only, no memory)."""
    with torch.device("meta"):
        model = method.prepare(VT5ForConditionalGeneration(config), seed=0)
    return {name: p.numel() for name, p in model.named_parameters() if p.requires_grad}


def test_freezing_the_token_embedding_at_the_vt5_base_shape() -> None:
    config = base_vt5_config()
    full = _communicated(FullFineTuning(), config)
    shampoo = _communicated(FedShampoo(), config)
    embedding = 32128 * 768  # the tied T5-base token embedding, counted by hand
    assert set(full) - set(shampoo) == {"language_backbone.shared.weight"}
    assert sum(full.values()) - sum(shampoo.values()) == embedding
    exact = embedding / sum(full.values())
    official = 1 - official_logger_bytes(shampoo) / official_logger_bytes(full)
    # the report's "about 26% of parameters, rather than transmitting whole parameters": the
    # embedding under its four state-dict names against every parameter of the model so counted
    with torch.device("meta"):
        whole = {n: p.numel() for n, p in VT5ForConditionalGeneration(config).named_parameters()}
    of_whole = 4 * embedding / (official_logger_bytes(whole) / 4)
    print(f"VT5-base: fedavg {sum(full.values()):,} values/message, fedshampoo "
          f"{sum(shampoo.values()):,}: {exact:.1%} fewer; official logger count: {official:.1%} "
          f"fewer; of the whole state dict: {of_whole:.1%}")
    assert 0.10 < exact < 0.12 and 0.30 < official < 0.33 and 0.25 < of_whole < 0.27


def test_the_frozen_embedding_is_not_trained_nor_sent_on_the_shipped_base() -> None:
    from benchmark.model import load_model

    model = FedShampoo().prepare(load_model("base"), seed=0)
    for name, parameter in model.named_parameters(remove_duplicate=False):
        assert parameter.requires_grad == (not name.startswith(
            ("visual_embedding.image_model.", *TOKEN_EMBEDDING))), name
    names = select_communicated(model).names
    assert not any(n.startswith(TOKEN_EMBEDDING) for n in names)
