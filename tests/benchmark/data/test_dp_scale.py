"""The `dp` scale: the competition's providers per client, few invoices each, real layout."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from benchmark.data import count_clients, read_data_points, read_imdb
from benchmark.data.synthetic import SCALES, generate_benchmark
from benchmark.data.synthetic.benchmark import plan_invoices, plan_providers

#: PFL-DocVQA's providers per client (the competition report's per-client table).
COMPETITION_PROVIDERS = (400, 418, 404, 414, 429, 423, 423, 416, 401, 421)


def test_dp_plan_has_the_competitions_providers_and_few_invoices_each(tmp_path: Path) -> None:
    scale = SCALES["dp"]
    assert scale.providers_per_client == COMPETITION_PROVIDERS
    providers = plan_providers(scale, 0)
    jobs = plan_invoices(scale, 0, providers, tmp_path)
    train = Counter(job.provider.company.provider_id for job in jobs if job.split == "train")
    per_client = Counter(p.client for p in providers if p.client >= 0)
    assert [per_client[k] for k in range(10)] == list(COMPETITION_PROVIDERS)
    assert len(train) == sum(COMPETITION_PROVIDERS) and min(train.values()) >= 1
    # about 1.5 invoices per provider: 50 sampled providers are a few hundred questions
    assert 1.3 < sum(train.values()) / len(train) < 1.8


@pytest.mark.slow
def test_dp_generator_writes_the_real_layout(tmp_path: Path) -> None:
    out = tmp_path / "dp"
    generate_benchmark(out, "dp", 0, workers=2, progress=False)
    info = json.loads((out / "benchmark.json").read_text())
    assert info["scale"] == "dp" and info["clients"] == 10 == count_clients(out)
    participant = out / "participant"
    points = read_data_points(participant / "data_points.json")
    for client, providers in enumerate(COMPETITION_PROVIDERS):
        header, records = read_imdb(participant / f"imdb_train_client_{client}.npy")
        groups = points[f"client_{client}"]
        assert len(groups) == providers
        indexes = sorted(i for rows in groups.values() for i in rows)
        assert indexes == list(range(1, len(records) + 1))  # header at position 0
        assert all((participant / "images" / f"{r['image_name']}.jpg").is_file()
                   for r in records[:20])
    assert sorted(p.name for p in (out / "evaluator").iterdir()) == ["images", "imdb_test.npy"]
    assert (participant / "imdb_val.npy").is_file() and (out / "public" / "imdb_train.npy").is_file()
