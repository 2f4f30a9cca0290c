"""Verification by reproduction: honest runs are re-run exactly, each lie is named where it shows.

Every run here is a real ``pflkit train`` on a generated ``tiny`` benchmark (one thread), and
every re-run goes through the real sandbox (bubblewrap, no network, the kit copy and the
training files read-only). The participant's own method is trained the way a participant would
have it: a kit with one more file, here a copy of the kit in the same sandbox.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from safetensors.torch import load_file, save_file

from benchmark.provenance import KIT_ROOT
from evaluator.reproduction.rerun import Reproduction, reproduce_run_directory, train_in_sandbox
from evaluator.reproduction.sandbox import sandbox_unavailable
from evaluator.reproduction.verdict import EXACT, FAILED, NOT_REPRODUCED, WITHIN

pytestmark = pytest.mark.skipif(sandbox_unavailable() is not None,
                                reason=f"no sandbox here: {sandbox_unavailable()}")  # fmt: skip

SHORT = ("--rounds", "2", "--clients-per-round", "2", "--local-epochs", "1", "--batch-size", "4",
         "--val-limit", "0", "--threads", "1", "--no-progress")  # fmt: skip


def _train(data: Path, out: Path, *args: str, base: Path | None = None) -> Path:
    from baselines.cli import train

    start = ("--base", str(base)) if base is not None else ()
    result = CliRunner().invoke(train, ["--data", str(data), "--out", str(out), *SHORT, *start,
                                        *args], catch_exceptions=False)  # fmt: skip
    assert result.exit_code == 0, result.output
    return out


def _reproduce(run: Path, data: Path, reference: Path, **options: Any) -> Reproduction:
    """The re-run of ``run`` from the reference it was trained from."""
    return reproduce_run_directory(run, data, base_dir=reference, **options)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_benchmark: Path, width32_reference: Path) -> dict[str, Path]:
    """Honest runs from the width-32 reference: fedavg, dp-lora at sigma 1, lora; and dp-lora at
    half the noise and half the server step (the liar's real training)."""
    root = tmp_path_factory.mktemp("runs")
    base = width32_reference
    return {
        "fedavg": _train(tiny_benchmark, root / "fedavg", "--preset", "fedavg", base=base),
        "dp-lora": _train(tiny_benchmark, root / "dp-lora", "--preset", "dp-lora",
                          "--noise-multiplier", "1.0", base=base),
        "lora": _train(tiny_benchmark, root / "lora", "--preset", "lora", base=base),
        "dp-lora-cut": _train(tiny_benchmark, root / "dp-lora-cut", "--preset", "dp-lora",
                              "--noise-multiplier", "0.5", "--server-lr", "0.025", base=base),
    }  # fmt: skip


def _copy(run: Path, to: Path) -> Path:
    shutil.copytree(run, to)
    return to


def test_honest_runs_reproduce_exactly(runs, tiny_benchmark, width32_reference) -> None:
    for name in ("fedavg", "dp-lora"):
        result = _reproduce(runs[name], tiny_benchmark, width32_reference)
        assert result.verdict.outcome == EXACT, (name, result.verdict)
        assert result.verdict.reproduced and not result.bundle
        logged = sum(json.loads(line)["official_logger_bytes"] for line in
                     (runs[name] / "communication_log.jsonl").read_text().splitlines())
        assert result.verdict.figures["official_logger_total_bytes"] == logged


def test_another_thread_count_reproduces_within_tolerance(runs, tiny_benchmark,
                                                          width32_reference) -> None:  # fmt: skip
    result = _reproduce(runs["dp-lora"], tiny_benchmark, width32_reference, threads=2)
    assert result.verdict.outcome in (WITHIN, EXACT)
    if result.verdict.outcome == WITHIN:
        assert result.verdict.figures["ratio"] < 1e-4
        assert result.verdict.where["round"] >= 1 and result.verdict.where["tensor"]


def test_a_checkpoint_edited_after_training_is_not_reproduced(
    runs, tiny_benchmark, width32_reference, tmp_path
):
    run = _copy(runs["fedavg"], tmp_path / "edited")
    model = run / "checkpoint" / "model.safetensors"
    tensors = load_file(str(model))
    name = "language_backbone.encoder.block.0.layer.0.SelfAttention.q.weight"
    tensors[name] = tensors[name] * 1.001
    save_file(tensors, str(model), metadata={"format": "pt"})
    verdict = _reproduce(run, tiny_benchmark, width32_reference).verdict
    assert verdict.outcome == NOT_REPRODUCED
    assert "changed after training" in verdict.reason and verdict.where == {"file": "model.safetensors"}


def test_a_log_edited_with_its_details_is_not_reproduced(runs, tiny_benchmark, width32_reference,
                                                         tmp_path) -> None:  # fmt: skip
    run = _copy(runs["fedavg"], tmp_path / "fewer-bytes")
    rows = (run / "communication_log.csv").read_text().splitlines()
    round_, sender, receiver, size = rows[2].split(",")
    rows[2] = ",".join([round_, sender, receiver, str(int(size) // 4)])
    (run / "communication_log.csv").write_text("\n".join(rows) + "\n")
    lines = (run / "communication_log.jsonl").read_text().splitlines()
    message = json.loads(lines[1])
    message["amount_of_bytes"] = int(size) // 4
    lines[1] = json.dumps(message, sort_keys=True)
    (run / "communication_log.jsonl").write_text("\n".join(lines) + "\n")
    verdict = _reproduce(run, tiny_benchmark, width32_reference).verdict
    assert verdict.outcome == NOT_REPRODUCED
    assert verdict.where == {"file": "communication_log.csv", "row": 2}


def test_a_dp_run_at_half_the_noise_with_the_step_shrunk_is_not_reproduced(
    runs, tiny_benchmark, width32_reference, tmp_path
) -> None:
    """The liar trained at sigma 0.5 and half the server step (so the model's change carries
    the declared noise energy) and submits the honest sigma-1 run's declarations and recipe."""
    run = _copy(runs["dp-lora-cut"], tmp_path / "liar")
    for name in ("privacy.json", "submission.json", "recipe.json"):
        shutil.copyfile(runs["dp-lora"] / name, run / name)
    verdict = _reproduce(run, tiny_benchmark, width32_reference).verdict
    assert verdict.outcome == NOT_REPRODUCED
    assert verdict.where["round"] == 1 and verdict.where["tensor"]
    assert "recipe's own machine type" in verdict.reason
    honest_recipe = _copy(runs["dp-lora-cut"], tmp_path / "honest-recipe")
    for name in ("privacy.json", "submission.json"):
        shutil.copyfile(runs["dp-lora"] / name, honest_recipe / name)
    verdict = _reproduce(honest_recipe, tiny_benchmark, width32_reference).verdict
    assert verdict.outcome == NOT_REPRODUCED
    assert verdict.where == {"file": "submission.json", "field": "server"} or (
        verdict.where.get("file") == "privacy.json")


def test_a_recipe_of_another_preset_is_not_reproduced(runs, tiny_benchmark, width32_reference,
                                                       tmp_path) -> None:  # fmt: skip
    run = _copy(runs["lora"], tmp_path / "swapped")
    shutil.copyfile(runs["fedavg"] / "recipe.json", run / "recipe.json")
    verdict = _reproduce(run, tiny_benchmark, width32_reference).verdict
    assert verdict.outcome == NOT_REPRODUCED
    assert verdict.where == {"file": "submission.json", "field": "method"}
    assert "'lora'" in verdict.reason and "'fedavg'" in verdict.reason


def _own_method(nosy: Path | None = None) -> str:
    """A copy of FedProx under the name ``myprox`` (its own option key and preset); ``nosy``:
    it also reads that file when imported."""
    source = (KIT_ROOT / "baselines" / "methods" / "fedprox.py").read_text()
    for old, new in (("FedProxOptions", "MyProxOptions"), ("FedProx", "MyProx"),
                     ('"fedprox_"', '"myprox_"'), ('name = "fedprox"', 'name = "myprox"'),
                     ('"fedprox": {"extends": "fedavg", "method": "fedprox", "fedprox_mu"',
                      '"myprox": {"extends": "fedavg", "method": "myprox", "myprox_mu"'),
                     ("--fedprox-mu", "--myprox-mu")):  # fmt: skip
        assert old in source, old
        source = source.replace(old, new)
    if nosy is not None:
        source += f"\nANSWERS = open({str(nosy)!r}, 'rb').read()\n"
    return source


def _participant_run(tiny_benchmark: Path, root: Path, method: str, **inputs: Path) -> Path:
    """A participant's run of their own method: the kit plus one file, trained in a sandbox."""
    path = "baselines/methods/myprox.py"
    training = train_in_sandbox(["--preset", "myprox", *SHORT[:-1]], files={path: method},
                                data_dir=tiny_benchmark, root=root, inputs=inputs)  # fmt: skip
    assert training.result.returncode == 0, training.result.stderr[-3000:]
    assert training.bundle == {path: "new"}
    recipe = json.loads((training.run / "recipe.json").read_text())
    assert recipe["files"][path] == method
    return training.run


def test_a_bundled_one_file_method_is_reproduced_exactly(tiny_benchmark, tmp_path) -> None:
    run = _participant_run(tiny_benchmark, tmp_path / "participant", _own_method())
    result = reproduce_run_directory(run, tiny_benchmark)
    assert result.verdict.outcome == EXACT, result.verdict
    assert result.bundle == {"baselines/methods/myprox.py": "new"}
    assert json.loads((run / "submission.json").read_text())["method"] == "myprox"


def test_a_bundled_method_reading_what_it_should_not_fails_with_the_reason(
    tiny_benchmark, tmp_path
) -> None:
    answers = tmp_path / "hidden" / "imdb_test.npy"
    answers.parent.mkdir()
    answers.write_bytes((tiny_benchmark / "evaluator" / "imdb_test.npy").read_bytes())
    inside = "/hidden/imdb_test.npy"
    run = _participant_run(tiny_benchmark, tmp_path / "participant", _own_method(Path(inside)),
                           **{inside: answers})  # fmt: skip
    result = reproduce_run_directory(run, tiny_benchmark)
    assert result.verdict.outcome == FAILED
    assert "did not run" in result.verdict.reason
    assert "FileNotFoundError" in result.verdict.where["error"] and inside in result.verdict.where["error"]


def test_pflkit_reproduce_prints_the_verdict_and_never_the_seed(tiny_benchmark, tmp_path) -> None:
    from pflkit.cli import main

    run = _train(tiny_benchmark, tmp_path / "fedavg", "--preset", "fedavg")  # the shipped base
    result = CliRunner().invoke(main, ["reproduce", str(run), "--data",
                                       str(tiny_benchmark), "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    printed = json.loads(result.output)
    assert printed["verdict"]["outcome"] == EXACT and "seed" not in result.output
    missing = CliRunner().invoke(main, ["reproduce", str(tiny_benchmark), "--data",
                                        str(tiny_benchmark)])  # fmt: skip
    assert missing.exit_code == 1 and "no recipe" in missing.output


def _preset_args(preset: str) -> tuple[str, ...]:
    from tests.baselines.test_cpu_pins import preset_options

    return ("--preset", preset, *preset_options(preset))


def _every_preset() -> list:
    from baselines.presets import all_presets

    fast = ("lora-nf4",)  # track 3's re-run: test_an_edited_personal_model_is_not_reproduced
    return [preset if preset in fast else pytest.param(preset, marks=pytest.mark.slow)
            for preset in sorted(all_presets())]  # fmt: skip


@pytest.mark.parametrize("preset", _every_preset())
def test_every_preset_reproduces_exactly_on_its_machine(preset, tiny_benchmark, width32_reference,
                                                        tmp_path) -> None:  # fmt: skip
    run = _train(tiny_benchmark, tmp_path / preset, *_preset_args(preset), base=width32_reference)
    result = _reproduce(run, tiny_benchmark, width32_reference)
    assert result.verdict.outcome == EXACT, result.verdict


def test_an_edited_personal_model_is_not_reproduced(tiny_benchmark, width32_reference,
                                                    tmp_path) -> None:  # fmt: skip
    run = _train(tiny_benchmark, tmp_path / "track3", *_preset_args("fedavg-ft"),
                 base=width32_reference)  # fmt: skip
    personal = sorted((run / "personal").glob("*.safetensors"))[0]
    tensors = load_file(str(personal))
    name = next(iter(tensors))
    tensors[name] = tensors[name] + 0.01
    save_file(tensors, str(personal), metadata={"format": "pt"})
    verdict = _reproduce(run, tiny_benchmark, width32_reference).verdict
    assert verdict.outcome == NOT_REPRODUCED
    assert verdict.where == {"file": f"personal/{personal.name}"}
