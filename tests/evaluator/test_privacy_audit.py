"""The worker's one-run privacy audit on real runs of the kit.

A `tiny` benchmark with canary providers; the shipped base as the organisers' reference; real
``pflkit train`` runs. The dishonest submission is a non-private FedAvg run uploaded to track 2
with the privacy declaration of an honest DP-FedAvg run at epsilon 1 (same rounds and clients,
so the declaration's arithmetic and its cross-check with the log pass): the audit contradicts
it, and does not contradict the honest run. Marked slow (minutes of training); the fast
variants check the attack on hand-made models and the audit's skip.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from baselines.cli import train
from evaluator import crud
from evaluator.canary_audit import CanaryAudit
from evaluator.core.db import session_scope
from evaluator.queue import TaskQueue
from evaluator.worker import JobRunner
from tests.evaluator.factories import store_run
from tests.small_model import save_small_reference

CANARIES, DOCUMENTS = 40, 2
SHARED = ("--rounds", "3", "--clients-per-round", "10", "--val-limit", "0", "--threads", "1",
          "--no-progress", "--seed", "0")  # fmt: skip


@pytest.fixture(scope="module")
def canary_benchmark(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from benchmark.data.synthetic import generate_benchmark

    out = tmp_path_factory.mktemp("audit") / "bench"
    generate_benchmark(out, "tiny", 0, workers=1, progress=False, public_documents=0,
                       canaries=CANARIES, canary_documents=DOCUMENTS)  # fmt: skip
    return out


def _train(data: Path, out: Path, *options: str) -> Path:
    result = CliRunner().invoke(train, ["--data", str(data), "--out", str(out), *options])
    assert result.exit_code == 0, result.output
    return out


def _scored(runner: JobRunner, submission_id: str):  # type: ignore[no-untyped-def]
    runner.run(submission_id)
    with session_scope(runner.settings.db_url) as session:
        row = crud.get_submission(session, submission_id=submission_id)
        session.expunge(row)
        return row


@pytest.fixture
def runner(settings, canary_benchmark: Path) -> JobRunner:  # type: ignore[no-untyped-def]
    scoring = settings.model_copy(update={"data_dir": canary_benchmark, "batch_size": 32,
                                          "reference_model": "base"})  # fmt: skip
    return JobRunner(scoring, TaskQueue(scoring.queue, name=scoring.queue_name))


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_false_epsilon_1_claim_is_contradicted_and_an_honest_one_is_not(
    runner: JobRunner, teams: dict, canary_benchmark: Path, tmp_path: Path
) -> None:
    honest = _train(canary_benchmark, tmp_path / "honest", "--method", "dp-fedavg",
                    "--epsilon", "1", *SHARED)  # fmt: skip
    liar = _train(canary_benchmark, tmp_path / "liar", "--method", "fedavg", "--local-epochs",
                  "3", *SHARED)  # fmt: skip
    declaration = honest / "privacy.json"
    assert json.loads(declaration.read_text())["epsilon"] <= 1.0
    lie = {**json.loads((liar / "submission.json").read_text()), "track": 2}
    honest_row = _scored(runner, store_run(runner, teams["alpha"], honest,
                                           meta=json.loads((honest / "submission.json").read_text()),
                                           privacy=declaration))  # fmt: skip
    assert (honest_row.status, honest_row.privacy_verified, honest_row.epsilon) == (
        "finished",
        True,
        1.0,
    )
    assert honest_row.audit_report["canaries"] == CANARIES
    assert honest_row.audit_seconds > 0
    assert honest_row.audit_epsilon <= 1.0
    assert honest_row.audit_contradicted is False
    # Since issue 36 the liar does not reach the audit: its change lacks the declared noise.
    liar_id = store_run(runner, teams["alpha"], liar, meta=lie, privacy=declaration)
    runner.run(liar_id)
    with session_scope(runner.settings.db_url) as session:
        liar_row = crud.get_submission(session, submission_id=liar_id)
        assert liar_row.status == "rejected" and "below the floor" in liar_row.events[-1].detail
    # The audit on its own still contradicts the liar's claim.
    columns = runner.steps.audit(liar / "checkpoint" / "model.safetensors", 1.0, 1e-5)
    assert columns["audit_report"]["canaries"] == CANARIES
    assert columns["audit_epsilon"] > 1.0, columns["audit_report"]
    assert columns["audit_contradicted"] is True
    assert "contradicted by audit" in columns["audit_report"]["flag"]
    assert columns["audit_auc"] > 0.9


@pytest.fixture(scope="module")
def small_reference(tmp_path_factory, canary_benchmark: Path) -> Path:  # type: ignore[no-untyped-def]
    """A random VT5 small enough to train in seconds (T5 width 32, one layer each side), its
    tokenizer fitted on the participant data: the base of the fast variant."""
    from benchmark.data import load_split

    rows = [r for k in range(10) for r in load_split(canary_benchmark, "train", client=k)]
    return save_small_reference(rows, tmp_path_factory.mktemp("audit-reference"), vocab_size=300,
                                max_answer_tokens=8)  # fmt: skip


def _fine_tuned(reference: Path, data: Path, providers: set[str], steps: int):  # type: ignore[no-untyped-def]
    """The reference trained with AdamW on the training records of ``providers`` only."""
    import random

    import torch

    from benchmark.data.imdb import read_imdb
    from benchmark.model import load_model, load_processor

    records = [r for k in range(10)
               for r in read_imdb(data / "participant" / f"imdb_train_client_{k}.npy")[1]
               if r["provider"] in providers]  # fmt: skip
    model, processor = load_model(reference).train(), load_processor(reference)
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3)
    rng = random.Random(0)
    for _ in range(steps):
        batch = rng.sample(records, 16)
        inputs = processor(
            [r["question"] for r in batch], [r["ocr_tokens"] for r in batch],
            [r["ocr_normalized_boxes"] for r in batch],
            images=[data / "participant" / "images" / f"{r['image_name']}.jpg" for r in batch],
            answers=[r["answers"] for r in batch],
        )  # fmt: skip
        model(**inputs).loss.backward()
        optimiser.step()
        optimiser.zero_grad()
    return model.eval()


@pytest.fixture(scope="module")
def memorising(canary_benchmark: Path, small_reference: Path):  # type: ignore[no-untyped-def]
    """The small model fine-tuned for 60 steps on the included canaries' invoices (what a
    non-private run does to them); two tests audit it, neither changes it."""
    coins = json.loads((canary_benchmark / "evaluator" / "canaries.json").read_text())["canaries"]
    included = {c["provider"] for c in coins if c["included"]}
    return _fine_tuned(small_reference, canary_benchmark, included, 60)


def test_the_attack_on_a_real_tiny_model(canary_benchmark: Path, small_reference: Path,
                                         memorising) -> None:  # fmt: skip
    """Fast variant: the small model fine-tuned on the included canaries' invoices (what a
    non-private run does to them) is found out; the untrained model gains nothing; a model
    trained on ordinary providers only (no canary in its data) gives no bound."""
    coins = json.loads((canary_benchmark / "evaluator" / "canaries.json").read_text())["canaries"]
    included = {c["provider"] for c in coins if c["included"]}
    auditor = CanaryAudit(canary_benchmark, small_reference)
    from benchmark.model import load_model

    untouched = auditor.audit(load_model(small_reference).eval(), None)
    assert untouched["audit_epsilon"] == 0.0
    assert untouched["audit_report"]["delta"] == 1e-5
    assert untouched["audit_report"]["delta_source"] == "default (no claim)"

    memorised = auditor.audit(memorising, 1e-5)
    report = memorised["audit_report"]
    assert (report["canaries"], report["canaries_in"]) == (CANARIES, len(included))
    # measured with the `question` attack: AUC 0.885, bound 0.806 (20 guesses, 19 right)
    assert memorised["audit_auc"] > 0.8, report
    assert memorised["audit_epsilon"] > 0.5, report
    assert report["attack"] == "calibrated"
    assert report["auc_by_attack"]["calibrated"] == memorised["audit_auc"]
    assert report["auc_by_attack"]["question"] > 0.8, report

    from benchmark.data.imdb import read_data_points

    points = read_data_points(canary_benchmark / "participant" / "data_points.json")
    ordinary = {p for client in points.values() for p in client} - included
    blind = auditor.audit(_fine_tuned(small_reference, canary_benchmark, ordinary, 60), 1e-5)
    assert blind["audit_epsilon"] == 0.0, blind["audit_report"]


def test_the_audit_is_skipped_without_canaries(tiny_benchmark: Path) -> None:
    auditor = CanaryAudit(tiny_benchmark, Path("unused"))
    assert not auditor.available
    assert auditor.audit(None, 1e-5) == {
        "audit_report": {"skipped": "the benchmark has no canary providers (generate it with "
                                    "--canaries M)"}
    }  # fmt: skip


def test_pflkit_audit_reports_what_the_worker_would(
    canary_benchmark: Path, small_reference: Path, memorising, tmp_path: Path
) -> None:
    """`pflkit audit` on run directories: the memorising model's bound is the auditor's own,
    its false epsilon claim (from privacy.json, with its delta) is contradicted, the untrained
    model gives 0 and no claim; a directory without a checkpoint is a clear error."""
    from benchmark.model import load_model, load_processor, save_checkpoint
    from evaluator.canary_audit import ATTACKS
    from evaluator.cli import ATTACK_NAMES, audit
    from tests.evaluator.factories import declaration

    assert ATTACK_NAMES == ATTACKS
    model = memorising
    liar = tmp_path / "liar"
    save_checkpoint(model, load_processor(small_reference), liar / "checkpoint")
    claim = declaration(epsilon=0.25, delta=1e-6)
    (liar / "privacy.json").write_text(json.dumps(claim))
    plain = tmp_path / "plain"
    save_checkpoint(
        load_model(small_reference), load_processor(small_reference), plain / "checkpoint"
    )

    result = CliRunner().invoke(
        audit,
        [
            str(liar),
            str(plain),
            "--data",
            str(canary_benchmark),
            "--base",
            str(small_reference),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    expected = CanaryAudit(canary_benchmark, small_reference).audit(model, 1e-6)
    assert rows[0]["audit_epsilon"] == pytest.approx(expected["audit_epsilon"])
    assert rows[0]["audit_epsilon"] > 0.25
    assert (rows[0]["claimed_epsilon"], rows[0]["delta"], rows[0]["contradicted"]) == (
        0.25,
        1e-6,
        True,
    )
    assert (rows[1]["audit_epsilon"], rows[1]["claimed_epsilon"], rows[1]["contradicted"]) == (
        0.0,
        None,
        False,
    )
    assert rows[1]["delta"] == 1e-5 and rows[1]["base_seconds"] > 0
    # the claim tested is the declared mechanism's, as the worker reads it
    import accountant
    from evaluator.canary_audit import audited_claim

    tested, basis = audited_claim(0.25, accountant.verify(claim).to_dict())
    assert (rows[0]["tested_epsilon"], rows[0]["claim_basis"]) == (pytest.approx(tested), basis)
    assert tested <= 0.25 and (rows[1]["tested_epsilon"], rows[1]["claim_basis"]) == (None, None)

    missing = CliRunner().invoke(
        audit, [str(tmp_path), "--data", str(canary_benchmark), "--base", str(small_reference)]
    )
    assert missing.exit_code != 0 and "no checkpoint to audit" in missing.output


@pytest.fixture(scope="module")
def reconstruction_benchmark(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from benchmark.data.synthetic import generate_benchmark

    out = tmp_path_factory.mktemp("audit-reconstruction") / "bench"
    generate_benchmark(out, "tiny", 1, workers=1, progress=False, public_documents=0,
                       canaries=CANARIES, canary_kind="reconstruction")  # fmt: skip
    return out


@pytest.fixture(scope="module")
def reconstruction_reference(tmp_path_factory, reconstruction_benchmark: Path) -> Path:  # type: ignore[no-untyped-def]
    """The fast variant's small random VT5, its tokenizer fitted on the reconstruction data."""
    from benchmark.data import load_split

    rows = [r for k in range(10) for r in load_split(reconstruction_benchmark, "train", client=k)]
    return save_small_reference(rows, tmp_path_factory.mktemp("reconstruction-reference"),
                                vocab_size=300, max_answer_tokens=8)  # fmt: skip


def test_the_reconstruction_audit_on_a_real_tiny_model(
    reconstruction_benchmark: Path, reconstruction_reference: Path
) -> None:
    """Reconstruction canaries: the small model fine-tuned on the canaries' invoices fits the
    version of their records with the true VAT id and IBAN better than the other candidates'
    and the f-DP analysis bounds epsilon; the untrained model learned nothing and gives no
    bound; only the probes of the first invoice of each canary are scored when
    ``probe_documents`` is 1. The abstaining guesser is what finds the memorised canaries:
    the AUC over all candidates stays near chance."""
    from benchmark.model import load_model

    coins = json.loads((reconstruction_benchmark / "evaluator" / "canaries.json").read_text())
    providers = {c["provider"] for c in coins["canaries"]}
    auditor = CanaryAudit(reconstruction_benchmark, reconstruction_reference, probe_documents=1)
    assert auditor.kind == "reconstruction"
    scored = {probe["document_id"] for probe in auditor._canaries[2]}
    assert scored == {c["documents"][0] for c in coins["canaries"]}
    untouched = auditor.audit(load_model(reconstruction_reference).eval(), None)
    assert untouched["audit_epsilon"] == 0.0, untouched["audit_report"]
    auditor = CanaryAudit(reconstruction_benchmark, reconstruction_reference)
    trained = auditor.audit(_fine_tuned(reconstruction_reference, reconstruction_benchmark, providers, 200),
                            1e-5)  # fmt: skip
    report = trained["audit_report"]
    assert (report["kind"], report["candidates"], report["canaries"]) == (
        "reconstruction", 10, CANARIES
    )  # fmt: skip
    assert report["verdict_analysis"] == "fdp" and report["attack"] == "question"
    # measured (its own reference, seed 1): 8 of the 10 surest guesses right (chance: 1 in
    # 10), bound 2.57, though the AUC over all candidates is only 0.53; after 60 steps, nothing
    assert trained["audit_epsilon"] > 1.0, report
    assert report["fdp_correct"] >= report["fdp_guesses"] / 2
