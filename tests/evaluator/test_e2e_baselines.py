"""End to end with real baseline runs: `pflkit train` (tracks 1, 2 and 3) on a generated
benchmark, `pflkit submit --wait` to the real server, scores equal to `pflkit evaluate` (with
`--personal` for track 3), the communication log's total and the privacy report of
`pflkit dp verify`."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import httpx
import pytest

from tests.evaluator.service import Service, create_team, pflkit, service_env

TRAIN_OPTIONS = ("--rounds", "1", "--local-epochs", "1", "--val-limit", "4", "--threads", "1",
                 "--no-progress")


def _train(run_dir: Path, data: Path, base: Path, *method: str) -> Path:
    result = pflkit("train", *method, "--data", str(data), "--out", str(run_dir),
                    "--base", str(base), *TRAIN_OPTIONS)
    assert result.returncode == 0, result.stdout + result.stderr
    return run_dir


def _log_total(run_dir: Path) -> int:
    with open(run_dir / "communication_log.csv", newline="") as handle:
        return sum(int(row["amount_of_bytes"]) for row in csv.DictReader(handle))


def _submit(run_dir: Path, url: str, token: str, organiser: str) -> dict:
    result = pflkit("submit", str(run_dir), "--server", url, "--token", token, "--wait", "--json",
                    "--timeout", "600")
    assert result.returncode == 0, result.stdout + result.stderr
    submission_id = json.loads(result.stdout)["id"]
    return httpx.get(f"{url}/api/v1/submissions/{submission_id}",
                     headers={"Authorization": f"Bearer {organiser}"}).json()


def _serve_and_submit(tmp_path: Path, reference: Path, data: Path, *runs: Path) -> list[dict]:
    """`pflkit serve` on SQLite, the runs submitted one after the other by one team; each
    scored submission as the organisers see it (full precision; the team's view has 4
    decimals)."""
    database_url = f"sqlite:///{tmp_path / 'evaluator.db'}"
    env = service_env(tmp_path, reference=reference, data=data, database_url=database_url)
    token = create_team(database_url, "baselines")
    organiser = create_team(database_url, "org", organiser=True)
    service = Service(tmp_path / "serve.log", env)
    try:
        service.wait_healthy()
        return [_submit(run, service.url, token, organiser) for run in runs]
    finally:
        service.stop()


def _evaluate(run_dir: Path, data: Path) -> dict:
    result = pflkit("evaluate", str(run_dir / "checkpoint"), "--data", str(data), "--split",
                    "test", "--json", "--batch-size", "8")
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_baseline_runs_score_like_pflkit_evaluate(
    tmp_path: Path, tiny_reference: Path, tiny_benchmark: Path
) -> None:
    track1 = _train(tmp_path / "track1", tiny_benchmark, tiny_reference, "--method", "lora-nf4")
    track2 = _train(tmp_path / "track2", tiny_benchmark, tiny_reference, "--method", "dp-lora",
                    "--epsilon", "8")
    scored1, scored2 = _serve_and_submit(tmp_path, tiny_reference, tiny_benchmark, track1, track2)

    for run_dir, scored in ((track1, scored1), (track2, scored2)):
        assert scored["status"] == "finished", scored
        direct = _evaluate(run_dir, tiny_benchmark)
        assert scored["anls"] == pytest.approx(direct["anls"], abs=1e-9)
        assert scored["accuracy"] == pytest.approx(direct["accuracy"], abs=1e-9)
        assert scored["results"]["n_questions"] == direct["n"]
        assert scored["total_bytes"] == _log_total(run_dir)

    verify = pflkit("dp", "verify", str(track2 / "privacy.json"), "--json")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    declared = json.loads((track2 / "privacy.json").read_text())
    assert scored2["results"]["privacy_verified"] is True
    assert scored2["results"]["epsilon"] == pytest.approx(declared["epsilon"])
    assert scored2["results"]["privacy_report"]["log_mismatches"] == []


@pytest.mark.slow
def test_track3_baseline_run_scores_like_pflkit_evaluate_personal(
    tmp_path: Path, tiny_reference: Path, tiny_benchmark: Path
) -> None:
    run = _train(tmp_path / "track3", tiny_benchmark, tiny_reference, "--method", "fedavg-ft",
                 "--finetune-epochs", "1")  # fmt: skip
    (scored,) = _serve_and_submit(tmp_path, tiny_reference, tiny_benchmark, run)

    assert scored["status"] == "finished", scored
    # one FedAvg round, then the round that sends the final model to every client
    assert scored["total_bytes"] == _log_total(run) and scored["results"]["rounds"] == 2
    result = pflkit("evaluate", str(run / "checkpoint"), "--data", str(tiny_benchmark), "--split",
                    "test", "--json", "--batch-size", "8", "--personal", str(run / "personal"))
    assert result.returncode == 0, result.stdout + result.stderr
    direct = json.loads(result.stdout.strip().splitlines()[-1])
    results = scored["results"]
    # Each client's personalised questions are batched alike in both: the same figures.
    personal = {c["client"]: c["personal_anls"] for c in results["personal_clients"] if c["n"]}
    assert personal == pytest.approx(
        {c["client"]: c["personal_anls"] for c in direct["clients"] if c["n"]}, abs=1e-9
    )
    assert results["personal_anls"] == pytest.approx(direct["personal_anls"], abs=1e-9)
    assert results["n_personal"] == direct["n"]
    assert results["global_unseen_anls"] == pytest.approx(direct["unseen_anls"], abs=1e-6)
