"""One local step of `fedavg` and of LoRA (rank 6 on q and v) on the real VT5-base shape, on
the CPU (slow: `make test-slow`; about five minutes and 6 GB of memory on 2 cores).

The model is `pflkit model init --shape vt5-base` (random weights, the shipped tokenizer, no
hub); the data are two questions of a generated `tiny` client. Checked: the loss is finite, the
update holds exactly the communicated tensors and each one a step can move moved, and the message has
the real-shape size the README states (FedAvg: 250,333,440 values, 1,001,333,760 bytes).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

#: LoRA rank 6 on q and v: 12 encoder self-attentions and 12 decoder self- and cross-attentions,
#: each adapting q and v with A (6 x 768) and B (768 x 6).
LORA_QV_R6_VALUES = 36 * 2 * 2 * 6 * 768
#: trained in full beside the adapters: the box tables (2 x 1024 x 768), their LayerNorm and
#: projection, and the visual projection (768 x 768 + 768 each).
FULLY_TRAINED_VALUES = 2 * 1024 * 768 + 2 * 768 + 2 * (768 * 768 + 768)


@pytest.fixture(scope="module")
def vt5_base(tmp_path_factory) -> Path:
    from benchmark.model.random_init import init_checkpoint

    return init_checkpoint("vt5-base", tmp_path_factory.mktemp("vt5-base") / "model")


@pytest.mark.parametrize(
    ("preset", "overrides", "values"),
    [
        ("fedavg", {}, 250_333_440),
        (
            "lora",
            {"lora_rank": 6, "lora_targets": ("q", "v")},
            LORA_QV_R6_VALUES + FULLY_TRAINED_VALUES,
        ),
    ],
)
def test_one_local_step_at_the_real_size(preset, overrides, values, vt5_base, tiny_data):
    import torch

    from baselines.core.parameters import get_values, select_communicated
    from baselines.engine.document_task import build_task
    from baselines.engine.local_training import LocalTrainer
    from baselines.presets import preset_config
    from baselines.wire import get_codec

    torch.set_num_threads(2)
    config = preset_config(preset, **overrides)
    task = build_task(tiny_data, vt5_base, val_limit=0, clients=[0], progress=False)
    method = config.build_method()
    model = method.prepare(task.build_model(), seed=0)
    spec = select_communicated(model, prefix=method.prefix)
    start = get_values(model, spec)
    trainer = LocalTrainer(task.collate, epochs=1, batch_size=2, optimizer=config.build_optimizer())
    stats = trainer.train(model, task.client_data[0].select([0, 1]), seed=0)
    delta = {name: value - start[name] for name, value in get_values(model, spec).items()}

    assert stats.steps == 1 and math.isfinite(stats.loss)
    assert spec.numel == values
    moved = {name for name, change in delta.items() if float(change.abs().max()) > 0}
    # LoRA's A factors get no gradient while B is still 0: they move from the second step on
    expected = {name for name in spec.names if ".lora_A." not in name}
    assert moved == expected
    assert get_codec("fp32").encode(delta).data_bytes == 4 * values
