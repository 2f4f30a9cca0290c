"""Every model family from ``pflkit train`` to a row of the leaderboard page, through
``pflkit submit`` to the real server and worker.

The organisers hold a reference of each family they score (``PFLKIT_EVALUATOR_FAMILY_REFERENCES``
beside the VT5 ``reference_model``): for Pix2Struct and SmolVLM (Idefics3), a ``lora-nf4`` run
(track 1) and a ``dp-lora`` run (track 2) are scored like ``pflkit evaluate`` scores them, bound
to their logs, their privacy verified; a Pix2Struct ``fedavg-ft`` run is scored on track 3; each
row of the leaderboard page names its family. A server that holds no reference of a family
rejects its run, naming the families it scores.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from benchmark.model.random_init import init_checkpoint
from tests.evaluator.service import Service, create_team, pflkit, service_env

TRAIN = ("--rounds", "1", "--local-epochs", "1", "--val-limit", "0", "--threads", "1",
         "--no-progress", "--clients-per-round", "1")  # fmt: skip
FAMILIES = ("pix2struct", "idefics3")


@pytest.fixture(scope="module")
def family_bases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A random tiny base of each new family (`pflkit model init`), the organisers' reference
    of it and every run's starting point."""
    root = tmp_path_factory.mktemp("family-bases")
    return {family: init_checkpoint("tiny", root / family, family=family) for family in FAMILIES}


def _train(out: Path, data: Path, base: Path, *args: str) -> Path:
    result = pflkit("train", "--data", str(data), "--base", str(base), "--out", str(out),
                    *TRAIN, *args)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def _submit(run: Path, url: str, token: str) -> dict:
    result = pflkit("submit", str(run), "--server", url, "--token", token, "--wait", "--json",
                    "--timeout", "600")  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout)


def _evaluate(run: Path, data: Path) -> dict:
    result = pflkit("evaluate", str(run / "checkpoint"), "--data", str(data), "--split", "test",
                    "--json", "--batch-size", "8")  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def _page_with(url: str, ids: list[str], timeout: float = 30.0) -> str:
    """The leaderboard page once it shows every one of ``ids`` (the board is rebuilt from its
    version shortly after the last result)."""
    deadline = time.monotonic() + timeout
    while True:
        page = httpx.get(f"{url}/leaderboard", follow_redirects=True).text
        missing = [i for i in ids if i not in page]
        if not missing or time.monotonic() > deadline:
            assert not missing, f"the leaderboard page does not show {missing}"
            return page
        time.sleep(0.5)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_every_family_goes_from_training_to_the_leaderboard(
    tmp_path: Path, tiny_reference: Path, tiny_benchmark: Path, family_bases: dict[str, Path]
) -> None:
    runs = {}
    for family, base in family_bases.items():
        runs[(family, "lora-nf4")] = _train(tmp_path / f"{family}-lora", tiny_benchmark, base,
                                            "--preset", "lora-nf4", "--family", family)  # fmt: skip
        runs[(family, "dp-lora")] = _train(tmp_path / f"{family}-dp", tiny_benchmark, base,
                                           "--preset", "dp-lora", "--epsilon", "8")  # fmt: skip
    runs[("pix2struct", "fedavg-ft")] = _train(
        tmp_path / "pix2struct-ft", tiny_benchmark, family_bases["pix2struct"],
        "--preset", "fedavg-ft", "--finetune-epochs", "1",
    )  # fmt: skip
    database_url = f"sqlite:///{tmp_path / 'evaluator.db'}"
    env = service_env(tmp_path, reference=tiny_reference, data=tiny_benchmark,
                      database_url=database_url)  # fmt: skip
    env["PFLKIT_EVALUATOR_FAMILY_REFERENCES"] = json.dumps(
        {family: str(base) for family, base in family_bases.items()}
    )
    # a team per family: a board shows each team's best submission of a table
    tokens = {family: create_team(database_url, f"team-{family}") for family in FAMILIES}
    service = Service(tmp_path / "serve.log", env)
    try:
        service.wait_healthy()
        scored = {key: _submit(run, service.url, tokens[key[0]]) for key, run in runs.items()}
        page = _page_with(service.url, [result["id"] for result in scored.values()])
    finally:
        service.stop()
    for (family, preset), result in scored.items():
        assert result["status"] == "finished", (family, preset, result)
        assert result["family"] == family
        assert result["track"] == {"lora-nf4": 1, "dp-lora": 2, "fedavg-ft": 3}[preset]
    for family in FAMILIES:
        run, result = runs[(family, "lora-nf4")], scored[(family, "lora-nf4")]
        assert result["anls"] == pytest.approx(_evaluate(run, tiny_benchmark)["anls"], abs=1e-4)
        assert scored[(family, "dp-lora")]["results"]["privacy_verified"] is True
    assert scored[("pix2struct", "fedavg-ft")]["results"]["personal_anls"] is not None
    for family in FAMILIES:
        assert page.count(f"<td>{family}</td>") >= 2


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_family_the_organisers_hold_no_reference_of_is_rejected_by_name(
    tmp_path: Path, tiny_reference: Path, tiny_benchmark: Path, family_bases: dict[str, Path]
) -> None:
    run = _train(tmp_path / "run", tiny_benchmark, family_bases["pix2struct"],
                 "--preset", "lora-nf4")  # fmt: skip
    database_url = f"sqlite:///{tmp_path / 'evaluator.db'}"
    env = service_env(tmp_path, reference=tiny_reference, data=tiny_benchmark,
                      database_url=database_url)  # fmt: skip
    token = create_team(database_url, "families")
    service = Service(tmp_path / "serve.log", env)
    try:
        service.wait_healthy()
        result = pflkit("submit", str(run), "--server", service.url, "--token", token, "--wait",
                        "--json", "--timeout", "600")  # fmt: skip
    finally:
        service.stop()
    scored = json.loads(result.stdout)
    assert scored["status"] == "rejected", scored
    assert "declares model family 'pix2struct'; this competition scores vt5" in scored["reason"]
