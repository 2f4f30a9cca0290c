"""The evaluation loop and `pflkit evaluate` on generated `tiny` data."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from benchmark.data import load_split
from benchmark.evaluation import Prediction, evaluate, predict, score_predictions
from benchmark.metrics import anls_score, exact_match
from benchmark.model import load_model, load_processor
from pflkit.cli import main


@pytest.fixture(scope="module")
def model_and_processor(checkpoint):
    return load_model(checkpoint), load_processor(checkpoint)


def test_batched_predictions_equal_one_question_at_a_time(model_and_processor, tiny_data, tmp_path):
    model, processor = model_and_processor
    dataset = load_split(tiny_data, "val").select(range(12))
    batched = predict(model, processor, dataset, batch_size=5, cache_dir=tmp_path, progress=False)
    assert len(batched) == 12
    assert len(set(batched)) > 1, "answers should differ between pages"
    for index in (0, 5, 11):
        record = dataset[index]
        inputs = processor(
            [record["question"]], [record["ocr_tokens"]], [record["ocr_boxes"]],
            images=[record["image_path"]],
        )
        with torch.inference_mode():
            alone = processor.decode(model.generate(**inputs))[0]
        assert batched[index] == alone


def test_parallel_batches_answer_as_one_stream_and_restore_the_threads(
    model_and_processor, tiny_data, tmp_path
):
    model, processor = model_and_processor
    dataset = load_split(tiny_data, "val").select(range(12))
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one_stream = predict(model, processor, dataset, batch_size=3, cache_dir=tmp_path,
                             progress=False)
        torch.set_num_threads(2)
        two_streams = predict(model, processor, dataset, batch_size=3, cache_dir=tmp_path,
                              progress=False)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
    assert two_streams == one_stream


def test_evaluate_scores_every_question_with_breakdowns(model_and_processor, tiny_data, tmp_path):
    model, processor = model_and_processor
    dataset = load_split(tiny_data, "test")
    result = evaluate(model, processor, dataset, batch_size=16, progress=False, cache_dir=tmp_path)
    assert result.n == len(dataset)
    assert 0.0 <= result.accuracy <= result.anls <= 1.0
    assert set(result.by_distribution) == {"in", "out"}
    assert sum(g.n for g in result.by_distribution.values()) == result.n
    assert sum(g.n for g in result.by_question_type.values()) == result.n
    assert [p.question_id for p in result.predictions] == dataset["question_id"]
    for prediction, answers in zip(result.predictions, dataset["answers"], strict=True):
        assert prediction.anls == anls_score(prediction.prediction, answers)
    assert result.seconds > 0 and result.questions_per_second > 0


def test_scores_aggregate_per_distribution_and_type(tiny_data):
    dataset = load_split(tiny_data, "test")
    answers = dataset["answers"]
    # gold answers for the in-distribution questions, a wrong answer elsewhere
    predictions = [
        a[0] if d == "in" else "zzzz" for a, d in zip(answers, dataset["distribution"], strict=True)
    ]
    result = score_predictions(dataset, predictions)
    assert result.by_distribution["in"].anls == 1.0 and result.by_distribution["in"].accuracy == 1.0
    assert result.by_distribution["out"].accuracy == 0.0
    n_in = result.by_distribution["in"].n
    expected = (n_in + sum(anls_score("zzzz", a) for a, d in
                           zip(answers, dataset["distribution"], strict=True) if d == "out")) / result.n
    assert result.anls == pytest.approx(expected)
    assert isinstance(result.predictions[0], Prediction)


def test_pflkit_evaluate_json_and_predictions_file_agree(checkpoint, tiny_data, tmp_path, monkeypatch):
    monkeypatch.setenv("PFLKIT_CACHE_DIR", str(tmp_path / "cache"))
    predictions_path = tmp_path / "preds.jsonl"
    runner = CliRunner()
    outcome = runner.invoke(
        main,
        ["evaluate", str(checkpoint), "--data", str(tiny_data), "--split", "test", "--json",
         "--predictions", str(predictions_path), "--batch-size", "8"],
    )
    assert outcome.exit_code == 0, outcome.output
    summary = json.loads(outcome.stdout.strip().splitlines()[-1])
    lines = [json.loads(line) for line in predictions_path.read_text().splitlines()]
    assert summary["n"] == len(lines) == len(load_split(tiny_data, "test"))
    anls = [anls_score(row["prediction"], row["answers"]) for row in lines]
    accuracy = [exact_match(row["prediction"], row["answers"]) for row in lines]
    assert summary["anls"] == pytest.approx(np.mean(anls))
    assert summary["accuracy"] == pytest.approx(np.mean(accuracy))
    assert [row["anls"] for row in lines] == pytest.approx(anls)
    assert 0.0 <= summary["anls"] <= 1.0 and 0.0 <= summary["accuracy"] <= 1.0
    assert set(summary["by_distribution"]) == {"in", "out"}
    assert {"question_id", "prediction", "answers", "anls"} <= set(lines[0])

    human = runner.invoke(
        main, ["evaluate", str(checkpoint), "--data", str(tiny_data), "--split", "test", "--limit", "5"]
    )
    assert human.exit_code == 0, human.output
    assert "ANLS" in human.output and "in-distribution" in human.output


def test_pflkit_evaluate_reports_bad_checkpoints_clearly(tiny_data, tmp_path):
    runner = CliRunner()
    (tmp_path / "empty").mkdir()
    outcome = runner.invoke(main, ["evaluate", str(tmp_path / "empty"), "--data", str(tiny_data)])
    assert outcome.exit_code == 1
    assert "config.json: missing" in outcome.output
