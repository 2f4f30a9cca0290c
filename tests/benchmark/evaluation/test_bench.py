"""`make bench`'s two loops: the starter-kit-style reference and the kit's loop agree."""

from __future__ import annotations

from bench.bench import REFERENCE_MAX_LENGTH, reference_predict
from benchmark.data import load_split
from benchmark.evaluation import predict
from benchmark.model import load_model, load_processor


def test_the_kit_loop_answers_like_the_reference_loop(checkpoint, tiny_data, tmp_path):
    model, processor = load_model(checkpoint), load_processor(checkpoint)
    dataset = load_split(tiny_data, "val").select(range(23))
    reference = reference_predict(model, processor, dataset)
    kit = predict(model, processor, dataset, batch_size=4,
                  max_new_tokens=REFERENCE_MAX_LENGTH - 1, cache_dir=tmp_path, progress=False)
    assert len(reference) == len(kit) == 23
    assert len(set(kit)) > 1, "answers should differ between pages"
    assert kit == reference
