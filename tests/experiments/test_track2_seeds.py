"""Track 2's table over seeds, combined from each seed's run directories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.catalog import EPSILONS
from experiments.track2_seeds import METHODS, main


def finished_run(out: Path, name: str, anls: float, epsilon: float) -> None:
    run = out / name
    run.mkdir(parents=True)
    (run / "val.json").write_text(json.dumps({"anls": anls}), encoding="utf-8")
    verified = {"epsilon": {"rdp": epsilon, "prv": epsilon - 0.1}}
    (run / "verify.json").write_text(json.dumps(verified), encoding="utf-8")


def two_seeds(tmp_path: Path) -> tuple[Path, Path]:
    outs = (tmp_path / "seed0", tmp_path / "seed1")
    for seed, out in enumerate(outs):
        for row, method in enumerate(METHODS):
            for epsilon in EPSILONS:
                anls = 0.25 + 0.01 * row + 0.001 * epsilon + 0.02 * seed
                finished_run(out, f"{method}-eps{epsilon}", anls, epsilon - 0.002 * seed)
    return outs


def test_cells_hold_each_seed_the_mean_and_the_verified_epsilons(tmp_path: Path) -> None:
    seed0, seed1 = two_seeds(tmp_path)
    target = tmp_path / "optimiser_track2.json"
    main([str(seed0), str(seed1), "--write", str(target), "--base-anls", "0.3341"])
    table = json.loads(target.read_text(encoding="utf-8"))
    assert [row["method"] for row in table["rows"]] == list(METHODS)
    assert table["rows"][1]["epsilon_4"] == "0.2640 / 0.2840 / 0.2740 (4.000, 3.998)"
    assert "Base: 0.3341." in table["note"]
    assert table["command"].startswith("python -m experiments.track2_seeds ")


def test_an_unfinished_run_is_refused_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed0, seed1 = two_seeds(tmp_path)
    (seed1 / "dp-clgecl-eps8" / "verify.json").unlink()
    target = tmp_path / "optimiser_track2.json"
    with pytest.raises(SystemExit):
        main([str(seed0), str(seed1), "--write", str(target)])
    assert "dp-clgecl-eps8: no verify.json" in capsys.readouterr().err
    assert not target.exists()
