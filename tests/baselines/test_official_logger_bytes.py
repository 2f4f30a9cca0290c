"""The official logger's byte count beside the kit's exact one (for the published tables)."""

from __future__ import annotations

import torch

from baselines.core.communication_log import CommunicationLog
from baselines.engine.communication import Channel
from baselines.wire import get_codec
from benchmark.communication_log import (
    LM_HEAD_NAME,
    TIED_EMBEDDING_NAMES,
    official_logger_bytes,
)
from benchmark.model import VT5ForConditionalGeneration
from benchmark.model.presets import base_vt5_config


def _full_fine_tuning_message(config) -> dict[str, int]:
    """Values per tensor of one FedAvg message: every parameter but the DiT, each storage once."""
    with torch.device("meta"):
        model = VT5ForConditionalGeneration(config)
    return {
        name: parameter.numel()
        for name, parameter in model.named_parameters()
        if not name.startswith("visual_embedding.image_model.")
    }


def test_full_fine_tuning_of_vt5_base_is_the_published_1_12_gib_per_message():
    sent = _full_fine_tuning_message(base_vt5_config(box_scale=1))
    assert sent[LM_HEAD_NAME] == 32128 * 768  # the public code's lm_head, apart from shared
    assert sum(sent.values()) == 250_333_440  # unique values: 1,001.3 MB exactly counted
    assert 4 * sum(sent.values()) == 1_001_333_760
    official = official_logger_bytes(sent)
    assert official == 4 * 299_682_048
    assert round(official / 2**30, 2) == 1.12  # the baseline's "1.12 GB" per message


def test_a_tied_lm_head_would_send_one_embedding_fewer():
    sent = _full_fine_tuning_message(base_vt5_config(box_scale=1, tie_lm_head=True))
    assert LM_HEAD_NAME not in sent
    assert sum(sent.values()) == 225_659_136 == 250_333_440 - 32128 * 768
    assert official_logger_bytes(sent) == 4 * 299_682_048  # lm_head counted as an alias


def test_tied_copies_already_sent_are_not_counted_twice():
    shared = {TIED_EMBEDDING_NAMES[0]: 10, "x": 5}
    assert official_logger_bytes(shared) == 4 * (15 + 3 * 10)
    untied = {**shared, TIED_EMBEDDING_NAMES[3]: 10}
    assert official_logger_bytes(untied) == 4 * (25 + 2 * 10)
    assert official_logger_bytes({"lora_A": 7}) == 28


def test_the_channel_logs_both_counts_for_every_message():
    log = CommunicationLog()
    channel = Channel(get_codec("fp32"), log)
    tensors = {TIED_EMBEDDING_NAMES[0]: torch.ones(4, 3), "spatial.weight": torch.ones(2)}
    channel.send(tensors, federated_round=1, sender=-1, receiver=0)
    channel.send(tensors, federated_round=1, sender=0, receiver=-1)
    assert [record.amount_of_bytes for record in log.records] == [56, 56]
    assert [record.official_logger_bytes for record in log.records] == [4 * (14 + 36)] * 2
    assert log.official_logger_total() == 400
    again = CommunicationLog.from_jsonl(log.to_jsonl())
    assert again.official_logger_total() == 400
