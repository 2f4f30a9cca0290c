"""How honest DP runs sit in track 2's noise-floor band, seed after seed (false alarms counted).

Trains each DP preset for ``--rounds`` rounds from a base on a benchmark, once per seed, and
applies the worker's noise floor (:func:`evaluator.validation.noise_floor.check_submission`)
to the run directory with its own ``privacy.json``. Prints one JSON line per run: preset, seed,
observed and expected noise energy, their ratio, floor, ceiling and whether it passed; then the
false-alarm count. Runs that already exist under ``--out`` are reused.

Usage: ``python -m bench.noisefloor --data DIR [--base base] [--out DIR] [--seeds 5]
[--rounds 2] [--epsilon 8] [PRESET ...]``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

PRESETS = ("dp-lora", "dp-fedavg", "dp-clgecl", "dp-clgecl-lora")


def train_once(preset: str, seed: int, args: argparse.Namespace) -> Path:
    """The run of one preset and seed (trained unless it exists).

    Raises:
        RuntimeError: the training failed (its output's end).
    """
    from click.testing import CliRunner

    from baselines.cli import train

    out = Path(args.out) / f"{preset}-seed{seed}"
    if not (out / "submission.json").is_file():
        result = CliRunner().invoke(train, [
            "--method", preset, "--data", str(args.data), "--out", str(out), "--base", args.base,
            "--rounds", str(args.rounds), "--epsilon", str(args.epsilon), "--seed", str(seed),
            "--val-limit", "0", "--threads", "1", "--no-progress"])  # fmt: skip
        if result.exit_code != 0:
            raise RuntimeError(result.output[-2000:])
    return out


def floor_of(run: Path, scorer: Any, data: Path) -> dict[str, Any]:
    """The worker's noise floor on one run directory."""
    from baselines.privacy.declaration_file import load_declaration
    from evaluator.validation.commdetails import read_details
    from evaluator.validation.commlog import parse_log
    from evaluator.validation.errors import InvalidSubmission
    from evaluator.validation.noise_floor import check_submission

    tally = parse_log(run / "communication_log.csv", clients=scorer.clients, max_bytes=1 << 30,
                      max_rows=10**6)  # fmt: skip
    messages = read_details(run / "communication_log.jsonl", tally.rows, max_bytes=1 << 32,
                            max_parameters=10**5)  # fmt: skip
    meta = json.loads((run / "submission.json").read_text())
    try:
        report = check_submission(run / "checkpoint" / "model.safetensors", scorer.reference,
                                  meta, load_declaration(run / "privacy.json"), messages,
                                  data_dir=data)  # fmt: skip
    except InvalidSubmission as error:
        return {"passed": False, "reason": str(error)}
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("presets", nargs="*", default=list(PRESETS))
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--base", default="base")
    parser.add_argument("--out", default="noisefloor-runs")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--epsilon", type=float, default=8.0)
    args = parser.parse_args()

    from evaluator.core.config import Settings
    from evaluator.scoring import Scorer

    scorer = Scorer.from_settings(Settings(storage_dir=Path(args.out) / ".storage",
                                           data_dir=args.data, reference_model=args.base))  # fmt: skip
    runs = alarms = 0
    for preset in args.presets:
        for seed in range(args.seeds):
            report = floor_of(train_once(preset, seed, args), scorer, args.data)
            runs += 1
            alarms += not report["passed"]
            line = {"preset": preset, "seed": seed, "passed": report["passed"]}
            if "observed_energy" in report:
                line.update({key: report[key] for key in ("values", "observed_energy",
                             "expected_noise_energy", "floor", "ceiling")})  # fmt: skip
                line["ratio"] = report["observed_energy"] / report["expected_noise_energy"]
            else:
                line["reason"] = report["reason"]
            print(json.dumps(line), flush=True)
    print(json.dumps({"runs": runs, "false_alarms": alarms}))


if __name__ == "__main__":
    main()
