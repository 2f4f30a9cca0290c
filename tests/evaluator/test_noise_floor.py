"""Track 2's noise floor in the worker, on real ``pflkit train`` runs of the tiny benchmark.

The organisers' reference is the shipped base; every run starts from it. Honest runs of the
kit's four DP presets finish verified with the floor's figures in their report. The attacks of
issue 36 are rejected with the expected and observed energies: a non-private LoRA run with a
DP run's declaration (same rounds and clients, so the accountant's arithmetic passes); the same
run declaring the server learning rate that matches its total energy to the noise's; a DP-LoRA
run trained at noise multiplier 0.54 and declared at 5 (epsilon 1); an NF4 run (a lossy uplink
has no floor).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from baselines.cli import train
from evaluator import crud
from evaluator.core.db import session_scope
from evaluator.queue import TaskQueue
from evaluator.worker import JobRunner
from tests.evaluator.factories import store_run

SHARED = ("--rounds", "2", "--val-limit", "0", "--threads", "1", "--no-progress", "--seed", "0")
RUNS = {
    "dp-lora": ("--method", "dp-lora", "--epsilon", "8"),
    "dp-fedavg": ("--method", "dp-fedavg", "--epsilon", "8"),
    "dp-clgecl": ("--method", "dp-clgecl", "--epsilon", "8"),
    "dp-clgecl-lora": ("--method", "dp-clgecl-lora", "--epsilon", "8"),
    "lora": ("--method", "lora"),
    "dp-lora-0.54": ("--method", "dp-lora", "--noise-multiplier", "0.54"),
    "lora-nf4": ("--method", "lora-nf4", "--local-epochs", "1"),
}


@pytest.fixture(scope="module")
def trained(tiny_benchmark: Path, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """name -> run directory, each run trained once on first use."""
    root = tmp_path_factory.mktemp("noise-floor-runs")
    done: dict[str, Path] = {}

    def run(name: str) -> Path:
        if name not in done:
            out = root / name
            result = CliRunner().invoke(train, ["--data", str(tiny_benchmark), "--out", str(out),
                                                *RUNS[name], *SHARED])  # fmt: skip
            assert result.exit_code == 0, result.output
            done[name] = out
        return done[name]

    return run


@pytest.fixture
def runner(settings, tiny_benchmark: Path) -> JobRunner:  # type: ignore[no-untyped-def]
    scoring = settings.model_copy(update={"data_dir": tiny_benchmark, "batch_size": 32,
                                          "reference_model": "base"})  # fmt: skip
    return JobRunner(scoring, TaskQueue(scoring.queue, name=scoring.queue_name))


def _outcome(runner: JobRunner, submission_id: str) -> tuple[str, str | None, dict | None]:
    runner.run(submission_id)
    with session_scope(runner.settings.db_url) as session:
        row = crud.get_submission(session, submission_id=submission_id)
        return row.status, row.events[-1].detail, row.privacy_report


def _declaration(tmp_path: Path, source: Path, **changes: object) -> Path:
    path = tmp_path / f"privacy-{len(list(tmp_path.glob('privacy-*')))}.json"
    path.write_text(json.dumps({**json.loads((source / "privacy.json").read_text()), **changes}))
    return path


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("preset", ["dp-lora", "dp-fedavg", "dp-clgecl", "dp-clgecl-lora"])
def test_honest_runs_of_the_dp_presets_pass(
    runner: JobRunner, teams: dict, trained, preset: str
) -> None:  # type: ignore[no-untyped-def]
    run = trained(preset)
    status, detail, report = _outcome(runner, store_run(runner, teams["alpha"], run,
                                                        privacy=run / "privacy.json"))  # fmt: skip
    assert status == "finished", detail
    floor = report["noise_floor"]
    assert floor["passed"] is True and floor["problems"] == []
    assert floor["floor"] <= floor["observed_energy"] <= floor["ceiling"]
    # The change is the noise: its energy is within 10% of the declared noise's expectation.
    assert floor["observed_energy"] == pytest.approx(floor["expected_noise_energy"], rel=0.1)
    assert floor["server"] == {"strategy": "fedavg", "lr": 0.05, "momentum": 0.0}


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_non_private_run_with_a_dp_declaration_is_rejected(
    runner: JobRunner, teams: dict, trained, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    honest, lora = trained("dp-lora"), trained("lora")
    declaration = honest / "privacy.json"  # same rounds and clients per round as the lora run
    lie = {**json.loads((lora / "submission.json").read_text()), "track": 2}
    status, detail, _ = _outcome(runner, store_run(runner, teams["alpha"], lora, meta=lie,
                                                   privacy=declaration))  # fmt: skip
    assert status == "rejected"
    assert detail.startswith("model: the checkpoint does not carry the noise")
    assert "below the floor" in detail and "expected noise energy" in detail

    # The same change declared with the server step that makes its total energy the noise's:
    # the change is shaped like training, not like noise, and some tensor leaves its band.
    first = dict(lie, server={"strategy": "fedavg", "lr": 1.0, "momentum": 0.0})
    _, at_one, _ = _outcome(runner, store_run(runner, teams["alpha"], lora, meta=first,
                                              privacy=declaration))  # fmt: skip
    observed = float(at_one.split("by an energy (sum of squares) of ")[1].split(",")[0])
    expected = float(at_one.split("(expected noise energy ")[1].split(")")[0])
    tuned = dict(lie, server={"strategy": "fedavg", "lr": math.sqrt(observed / expected),
                              "momentum": 0.0})  # fmt: skip
    status, detail, _ = _outcome(runner, store_run(runner, teams["alpha"], lora, meta=tuned,
                                                   privacy=declaration))  # fmt: skip
    assert status == "rejected" and "tensor " in detail, detail


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_less_noise_than_declared_is_rejected(
    runner: JobRunner, teams: dict, trained, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    run = trained("dp-lora-0.54")
    declared = _declaration(tmp_path, run, noise_multiplier=5.0, epsilon=1.0)
    status, detail, _ = _outcome(runner, store_run(runner, teams["alpha"], run,
                                                   privacy=declared))  # fmt: skip
    assert status == "rejected", detail
    assert "noise multiplier 5" in detail and "below the floor" in detail
    # Declared as trained, the same run passes.
    status, detail, report = _outcome(runner, store_run(runner, teams["alpha"], run,
                                                        privacy=run / "privacy.json"))  # fmt: skip
    assert status == "finished", detail
    assert report["noise_floor"]["passed"] is True


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_an_nf4_uplink_in_track_2_is_rejected(
    runner: JobRunner, teams: dict, trained, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    run = trained("lora-nf4")
    declared = _declaration(tmp_path, trained("dp-lora"), clients_per_round=1)
    lie = {**json.loads((run / "submission.json").read_text()), "track": 2}
    status, detail, _ = _outcome(runner, store_run(runner, teams["alpha"], run, meta=lie,
                                                   privacy=declared))  # fmt: skip
    assert status == "rejected"
    assert "is in 'nf4'" in detail and "noise floor is defined for fp32" in detail


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_an_adaptive_server_step_has_no_floor_and_is_refused(
    runner: JobRunner, teams: dict, trained
) -> None:  # type: ignore[no-untyped-def]
    run = trained("dp-lora")
    meta = {**json.loads((run / "submission.json").read_text()),
            "server": {"strategy": "fedadam", "lr": 0.01, "momentum": 0.0}}  # fmt: skip
    status, detail, _ = _outcome(runner, store_run(runner, teams["alpha"], run, meta=meta,
                                                   privacy=run / "privacy.json"))  # fmt: skip
    assert status == "rejected" and "server.strategy 'fedadam'" in detail
    del meta["server"]
    status, detail, _ = _outcome(runner, store_run(runner, teams["alpha"], run, meta=meta,
                                                   privacy=run / "privacy.json"))  # fmt: skip
    assert status == "rejected" and "server: missing" in detail
