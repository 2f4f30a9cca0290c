"""FedShampoo: the token embedding is frozen and never sent; what that saves per message on the
real VT5-base shape (a count on a meta-device model, no training)."""

from __future__ import annotations

import torch

from baselines.core.parameters import select_communicated
from baselines.methods.fedshampoo import TOKEN_EMBEDDING, FedShampoo
from baselines.methods.full import FullFineTuning
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
    embedding = 32128 * 768  # the T5-base token embedding, counted by hand
    # the public shape holds lm_head apart from shared: FedShampoo freezes both
    assert set(full) - set(shampoo) == {
        "language_backbone.shared.weight",
        "language_backbone.lm_head.weight",
    }
    assert sum(full.values()) - sum(shampoo.values()) == 2 * embedding
    assert sum(shampoo.values()) == 200_984_832
    exact = 2 * embedding / sum(full.values())
    official = 1 - official_logger_bytes(shampoo) / official_logger_bytes(full)
    # the report's "about 26% of parameters, rather than transmitting whole parameters": the
    # embedding under its four state-dict names against every parameter of the model so counted
    with torch.device("meta"):
        whole = {n: p.numel() for n, p in VT5ForConditionalGeneration(config).named_parameters()}
    of_whole = 4 * embedding / (official_logger_bytes(whole) / 4)
    print(
        f"VT5-base: fedavg {sum(full.values()):,} values/message, fedshampoo "
        f"{sum(shampoo.values()):,}: {exact:.1%} fewer; official logger count: {official:.1%} "
        f"fewer; of the whole state dict: {of_whole:.1%}"
    )
    assert 0.19 < exact < 0.20 and 0.32 < official < 0.34 and 0.25 < of_whole < 0.27


def test_the_frozen_embedding_is_not_trained_nor_sent_on_the_shipped_base() -> None:
    from benchmark.model import load_model

    model = FedShampoo().prepare(load_model("base"), seed=0)
    for name, parameter in model.named_parameters(remove_duplicate=False):
        assert parameter.requires_grad == (
            not name.startswith(("visual_embedding.image_model.", *TOKEN_EMBEDDING))
        ), name
    names = select_communicated(model).names
    assert not any(n.startswith(TOKEN_EMBEDDING) for n in names)


def test_the_cheapest_all_layer_adapters_at_both_shapes() -> None:
    """The 1,000x search's bound (README): rank-1 LoRA on every linear layer, nothing fully
    trained, NF4 on the wire, against a `fedavg` message, on the tiny base and on VT5-base."""
    from baselines.methods.lora import LoRA
    from benchmark.model import load_model
    from benchmark.wire_formats import nf4_data_bytes

    adapters = LoRA(rank=1, targets=("q", "k", "v", "o", "wi", "wo"), fully_trained=())
    big = _communicated(adapters, base_vt5_config())
    # per encoder layer: 4 x (768 + 768) attention + 2 x (768 + 3072) feed-forward = 13,824;
    # a decoder layer adds cross-attention's 6,144; 12 layers a side
    assert sum(big.values()) == 12 * 13_824 + 12 * (13_824 + 6_144) == 405_504
    big_nf4 = sum(nf4_data_bytes(n) for n in big.values())
    assert big_nf4 == 228_096
    full_message = 4 * sum(_communicated(FullFineTuning(), base_vt5_config()).values())
    assert full_message == 1_001_333_760 and round(full_message / big_nf4) == 4_390

    tiny = adapters.prepare(load_model("base"), seed=0)
    small = {n: p.numel() for n, p in tiny.named_parameters() if p.requires_grad}
    assert sum(small.values()) == 16_896
    assert sum(nf4_data_bytes(n) for n in small.values()) == 9_504  # the logged message size
