"""The worker binds the communication logs to the checkpoint (evaluator.validation.binding).

Real runs of the kit (``pflkit train`` in-process, one round on the `tiny` benchmark from the
evaluator's reference model) are stored as the API stores them and scored by the real worker;
the dishonest submissions are those runs with one part swapped or edited.
"""

from __future__ import annotations

import ast
import json
import logging
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from safetensors.numpy import load_file, save_file

from baselines.cli import train
from benchmark.communication_log import lora_adapted_module
from evaluator import crud
from evaluator.core.db import session_scope
from evaluator.queue import TaskQueue
from evaluator.storage import SubmissionStore
from evaluator.worker import JobRunner
from tests.evaluator.factories import store_run
from tests.small_model import save_small_reference

# The binding runs before any database write; the worker's transitions on PostgreSQL are
# tested in test_worker.py.
pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
TRAIN = ("--rounds", "1", "--local-epochs", "1", "--val-limit", "2", "--threads", "1",
         "--no-progress", "--clients-per-round", "1")  # fmt: skip


@pytest.fixture(scope="module")
def small_reference(tmp_path_factory, tiny_benchmark: Path) -> Path:  # type: ignore[no-untyped-def]
    """The organisers' reference model of these tests: a random VT5 small enough for a round
    of training and a scoring pass in seconds (T5 width 32, one encoder and decoder layer)."""
    from benchmark.data import load_split

    rows = load_split(tiny_benchmark, "train", client=0)
    return save_small_reference(rows, tmp_path_factory.mktemp("small-reference"), vocab_size=200,
                                max_answer_tokens=4)  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_benchmark: Path, small_reference: Path) -> dict[str, Path]:  # type: ignore[no-untyped-def]
    """An honest LoRA run (NF4 on the wire), an honest full fine-tune (fp32), one round, and the
    full fine-tune after one round of federated self-pretraining."""
    root = tmp_path_factory.mktemp("binding-runs")
    out = {}
    for preset, extra in (("lora-nf4", ()), ("fedavg", ()), ("fsp-fedavg", ("--fsp-rounds", "1"))):
        result = CliRunner().invoke(train, ["--method", preset, "--data", str(tiny_benchmark),
                                            "--out", str(root / preset), "--base",
                                            str(small_reference), *TRAIN, *extra])  # fmt: skip
        assert result.exit_code == 0, result.output
        out[preset] = root / preset
    return out


@pytest.fixture
def runner(settings, tiny_benchmark: Path, small_reference: Path) -> JobRunner:  # type: ignore[no-untyped-def]
    """The real worker with the small reference, scoring on the `tiny` benchmark's test split."""
    scoring = settings.model_copy(update={"data_dir": tiny_benchmark, "batch_size": 32,
                                          "reference_model": str(small_reference)})  # fmt: skip
    return JobRunner(scoring, TaskQueue(scoring.queue, name=scoring.queue_name))


def outcome(runner: JobRunner, submission_id: str) -> tuple[str, str | None]:
    """Run the worker on a submission; its final status and reason."""
    runner.run(submission_id)
    with session_scope(runner.settings.db_url) as session:
        row = crud.get_submission(session, submission_id=submission_id)
        return row.status, row.reason


def records(run: Path) -> list[dict]:
    """The detailed log's messages."""
    return [json.loads(line) for line in (run / "communication_log.jsonl").read_text().splitlines()]


def test_honest_runs_are_bound_and_scored(
    runner: JobRunner, teams: dict, runs: dict, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="evaluator.worker")
    reports = {}
    for preset, wire in (("lora-nf4", "nf4"), ("fedavg", "fp32")):
        messages = records(runs[preset])
        assert {m["format"] for m in messages} == {wire}
        status, reason = outcome(runner, store_run(runner, teams["alpha"], runs[preset]))
        assert (status, reason) == ("finished", None), preset
        bound = [r.getMessage() for r in caplog.records if "is bound to its logs" in r.message]
        reports[preset] = ast.literal_eval(bound[-1].split("is bound to its logs: ")[1])
    lora, full = reports["lora-nf4"], reports["fedavg"]
    adapters = {lora_adapted_module(n)[0] for n in records(runs["lora-nf4"])[1]["parameters"]
                if lora_adapted_module(n)}  # fmt: skip
    # every adapted matrix changed, by a change of exactly the declared rank 2; plus 8 tensors
    # sent in full (spatial embedding, visual projection)
    assert lora == {"messages": 2, "changed": len(adapters) + 8, "adapted": len(adapters),
                    "max_rank": 2}  # fmt: skip
    assert full["adapted"] == 0 and full["changed"] > lora["changed"]


def test_a_run_with_pretraining_rounds_is_bound_and_scored(
    runner: JobRunner, teams: dict, runs: dict
) -> None:
    run = runs["fsp-fedavg"]
    messages = records(run)
    assert [m["federated_round"] for m in messages] == [1, 1, 2, 2]
    # the pre-training messages carry the embedding with the added rows: more than its
    # reference size, which the binding accepts (a message may claim more, never less)
    assert messages[0]["amount_of_bytes"] > messages[2]["amount_of_bytes"]
    assert outcome(runner, store_run(runner, teams["alpha"], run)) == ("finished", None)


def test_pretraining_bytes_cannot_be_left_out_of_the_total(
    runner: JobRunner, teams: dict, runs: dict
) -> None:
    run = runs["fsp-fedavg"]
    messages = records(run)
    meta = json.loads((run / "submission.json").read_text())
    fine_tuning = sum(m["amount_of_bytes"] for m in messages if m["federated_round"] == 2)
    status, reason = outcome(runner, store_run(runner, teams["alpha"], run,
                                           meta={**meta, "total_bytes": fine_tuning}))
    assert status == "rejected" and reason.startswith(
        f"metadata: total_bytes is {fine_tuning} but the log sums to {meta['total_bytes']}")
    later = [m for m in messages if m["federated_round"] == 2]
    csv = "federated_round,sender,receiver,amount_of_bytes\n" + "".join(
        f"{m['federated_round']},{m['sender']},{m['receiver']},{m['amount_of_bytes']}\n"
        for m in later)
    details = "".join(json.dumps(m) + "\n" for m in later)
    status, reason = outcome(runner, store_run(runner, teams["alpha"], run, csv=csv, details=details,
                                           meta={**meta, "total_bytes": fine_tuning}))
    assert status == "rejected" and "1 pre-training rounds before fine-tuning" in reason


def test_full_fine_tune_with_a_lora_sized_log_is_rejected(
    runner: JobRunner, teams: dict, runs: dict, small_reference: Path
) -> None:
    lora = runs["lora-nf4"]
    submission_id = store_run(runner, teams["alpha"], lora,
                          model=runs["fedavg"] / "checkpoint" / "model.safetensors")  # fmt: skip
    status, reason = outcome(runner, submission_id)
    assert status == "rejected"
    # What fedavg changed that the LoRA run's clients sent neither in full nor as an adapter
    # (the token embedding, layer norms, the attention's relative position bias...).
    base = load_file(str(small_reference / "model.safetensors"))
    full = load_file(str(runs["fedavg"] / "checkpoint" / "model.safetensors"))
    names = records(lora)[1]["parameters"]
    sent = {n for n in names if not lora_adapted_module(n)}
    sent |= {lora_adapted_module(n)[0] + ".weight" for n in names if lora_adapted_module(n)}
    unsent = [n for n in base if not np.array_equal(base[n], full[n]) and n not in sent]
    assert "language_backbone.shared.weight" in unsent
    first = next(n for n in runner.scorer.expected_spec if n in unsent)
    assert reason.startswith(
        f"model: tensor {first} (and {len(unsent) - 1} more tensors) differs from the base "
        "(largest change "
    ), reason
    assert "but no client message carried it or an adapter of it; the clients sent 8 tensors " \
        "in full (spatial_embedding." in reason


def test_a_change_beyond_the_declared_lora_rank_is_rejected(
    runner: JobRunner, teams: dict, runs: dict, tmp_path: Path
) -> None:
    lora = runs["lora-nf4"]
    rank = json.loads((lora / "submission.json").read_text())["method_options"]["rank"]
    tensors = load_file(str(lora / "checkpoint" / "model.safetensors"))
    adapted = sorted({lora_adapted_module(name)[0] + ".weight"
                      for name in records(lora)[1]["parameters"] if lora_adapted_module(name)})  # fmt: skip
    name = adapted[0]
    noise = np.random.default_rng(0).standard_normal(tensors[name].shape).astype(np.float32)
    tensors[name] = tensors[name] + 1e-3 * noise
    save_file(tensors, str(tmp_path / "model.safetensors"))
    status, reason = outcome(runner, store_run(runner, teams["alpha"], lora,
                                           model=tmp_path / "model.safetensors"))  # fmt: skip
    assert status == "rejected"
    found = re.fullmatch(
        rf"model: tensor {re.escape(name)} travelled only as a LoRA adapter of rank {rank}, but "
        rf"its change has numerical rank (\d+) \(singular value {rank + 1} is (\S+), the "
        r"tolerance (\S+)\)", reason,
    )  # fmt: skip
    assert found, reason
    assert rank < int(found.group(1)) <= min(tensors[name].shape)
    assert float(found.group(2)) > 1e3 * float(found.group(3))


def test_an_fp32_log_claiming_fewer_bytes_than_its_values_need_is_rejected(
    runner: JobRunner, teams: dict, runs: dict
) -> None:
    run = runs["fedavg"]
    messages = records(run)
    honest = messages[0]["amount_of_bytes"]
    for message in messages:
        message["amount_of_bytes"] //= 2
    csv = "federated_round,sender,receiver,amount_of_bytes\n" + "".join(
        f"{m['federated_round']},{m['sender']},{m['receiver']},{m['amount_of_bytes']}\n"
        for m in messages
    )
    meta = json.loads((run / "submission.json").read_text())
    meta["total_bytes"] = sum(m["amount_of_bytes"] for m in messages)
    details = "".join(json.dumps(m) + "\n" for m in messages)
    status, reason = outcome(runner, store_run(runner, teams["alpha"], run, csv=csv, details=details,
                                           meta=meta))  # fmt: skip
    assert status == "rejected"
    count = len(messages[0]["parameters"])
    assert reason == (
        f"communication_details: line 1 (round 1, server -> client {messages[0]['receiver']}) "
        f"claims {honest // 2:,} bytes, but its {count} tensors ({honest // 4:,} values) need "
        f"at least {honest:,} bytes in fp32"
    )


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda m: m.update(total_bytes=m["total_bytes"] - 1),
         "metadata: total_bytes is {total} but the log sums to {real}; upload the metadata, "
         "logs and checkpoint of one run"),
        (lambda m: m.update(clients=7), "metadata: clients is 7 but the benchmark has 10; "
         "upload the metadata, logs and checkpoint of one run"),
        (lambda m: m.update(wire_format="fp32"),
         "communication_details: line 1 (round 1, server -> client {client}) is in 'nf4' but "
         "the metadata declares wire_format 'fp32'"),
        (lambda m: m["method_options"].pop("rank"),
         "communication_details: line 1 (round 1, server -> client {client}) carries the LoRA "
         "adapter {adapter} but the metadata declares no LoRA rank (method_options.rank)"),
    ],
    ids=["total-bytes", "clients", "wire-format", "no-rank"],
)
def test_metadata_that_disagrees_with_the_logs_is_rejected(
    edit, expected: str, runner: JobRunner, teams: dict, runs: dict
) -> None:  # type: ignore[no-untyped-def]
    run = runs["lora-nf4"]
    meta = json.loads((run / "submission.json").read_text())
    real = meta["total_bytes"]
    edit(meta)
    first = records(run)[0]
    adapter = next(name for name in first["parameters"] if lora_adapted_module(name))
    status, reason = outcome(runner, store_run(runner, teams["alpha"], run, meta=meta))
    assert status == "rejected"
    assert reason == expected.format(total=real - 1, real=real, client=first["receiver"],
                                     adapter=adapter)  # fmt: skip


def test_a_submission_without_the_detailed_log_is_rejected(
    runner: JobRunner, teams: dict, runs: dict
) -> None:
    # e.g. one stored before the detailed log was part of a submission, then re-scored
    submission_id = store_run(runner, teams["alpha"], runs["lora-nf4"])
    (SubmissionStore(runner.settings.storage_dir).directory(submission_id)
     / "communication_log.jsonl").unlink()  # fmt: skip
    assert outcome(runner, submission_id) == ("rejected", (
        "communication_details: the submission has no detailed communication log "
        "(communication_log.jsonl); submit the run directory again with it (pflkit submit "
        "sends it)"))  # fmt: skip


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda lines: lines[:-1], "communication_details: 1 message(s), but the CSV log has 2"),
        (lambda lines: [lines[0].replace('"amount_of_bytes": ', '"amount_of_bytes": 1'),
                        lines[1]], "communication_details: line 1 is 1,-1,"),
        (lambda lines: [lines[0].replace('"format": "nf4"', '"format": "zip"'), lines[1]],
         "wire format 'zip' has no size formula"),
        (lambda lines: [lines[0].replace('"language_backbone.', '"nowhere.', 1), lines[1]],
         "which is not a linear layer of the reference model"),
        (lambda lines: [lines[0].replace('"spatial_embedding.', '"elsewhere.', 1), lines[1]],
         "names elsewhere.x_position_embeddings.weight, which is not a tensor of the reference "
         "model"),
        (lambda lines: [lines[0], "[1, 2]"], "communication_details: line 2: must be a JSON "
         "object"),
    ],
    ids=["missing-line", "other-row", "unknown-format", "unknown-adapter", "unknown-tensor",
         "not-an-object"],
)
def test_a_detailed_log_that_does_not_describe_the_csv_is_rejected(
    change, expected: str, runner: JobRunner, teams: dict, runs: dict
) -> None:  # type: ignore[no-untyped-def]
    run = runs["lora-nf4"]
    lines = (run / "communication_log.jsonl").read_text().splitlines()
    details = "\n".join(change(lines)) + "\n"
    status, reason = outcome(runner, store_run(runner, teams["alpha"], run, details=details))
    assert status == "rejected"
    assert expected in reason, reason



def test_an_untied_lm_head_is_sent_counted_and_bound_on_its_own(
    settings, teams: dict, tiny_benchmark: Path, tmp_path_factory, tmp_path: Path
) -> None:
    """A base whose `lm_head` is its own tensor (the public code's): full fine-tuning sends it
    beside `shared`, the official logger's column counts `shared` three times and `lm_head`
    once, LoRA leaves it frozen, and a changed `lm_head` that no message carried is refused."""
    from benchmark.communication_log import LM_HEAD_NAME, TOKEN_EMBEDDING_NAMES
    from benchmark.data import load_split

    rows = load_split(tiny_benchmark, "train", client=0)
    reference = save_small_reference(rows, tmp_path_factory.mktemp("untied-reference"),
                                     vocab_size=200, max_answer_tokens=4, tie_lm_head=False)
    runs = {}
    for preset in ("fedavg", "lora-nf4"):
        result = CliRunner().invoke(train, ["--method", preset, "--data", str(tiny_benchmark),
                                            "--out", str(tmp_path / preset), "--base",
                                            str(reference), *TRAIN])  # fmt: skip
        assert result.exit_code == 0, result.output
        runs[preset] = tmp_path / preset
    full = records(runs["fedavg"])[0]
    assert LM_HEAD_NAME in full["parameters"] and TOKEN_EMBEDDING_NAMES[0] in full["parameters"]
    assert not set(TOKEN_EMBEDDING_NAMES[1:]) & set(full["parameters"])
    base = load_file(str(reference / "model.safetensors"))
    values = sum(base[name].size for name in full["parameters"])
    assert full["amount_of_bytes"] == 4 * values
    assert full["official_logger_bytes"] == 4 * (values + 2 * base[TOKEN_EMBEDDING_NAMES[0]].size)
    assert LM_HEAD_NAME not in records(runs["lora-nf4"])[0]["parameters"]

    scoring = settings.model_copy(update={"data_dir": tiny_benchmark, "batch_size": 32,
                                          "reference_model": str(reference)})  # fmt: skip
    untied_runner = JobRunner(scoring, TaskQueue(scoring.queue, name=scoring.queue_name))
    for preset in runs:
        submitted = store_run(untied_runner, teams["alpha"], runs[preset])
        assert outcome(untied_runner, submitted) == ("finished", None), preset
    lora_model = load_file(str(runs["lora-nf4"] / "checkpoint" / "model.safetensors"))
    lora_model[LM_HEAD_NAME] = lora_model[LM_HEAD_NAME] + np.float32(0.01)
    moved = tmp_path / "moved.safetensors"
    save_file(lora_model, str(moved))
    status, reason = outcome(untied_runner, store_run(untied_runner, teams["alpha"],
                                                      runs["lora-nf4"], model=moved))
    assert status == "rejected"
    assert reason.startswith(f"model: tensor {LM_HEAD_NAME} differs from the base"), reason
