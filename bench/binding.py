"""Every preset's run passes the evaluator's binding checks, and what the checks cost.

Trains each preset for one round (``local-only``: its own zero rounds) from a base on a
benchmark, then runs the worker's checks on the run directory exactly as the worker does
(``parse_log``, ``read_details``, ``evaluator.validation.binding.bind``) and prints, per preset,
``PASS`` with the binding report and its wall time, or ``REJECTED`` with the reason. Runs that
already exist under ``--out`` are reused. DP presets are trained at ``--epsilon``.

Usage: ``python -m bench.binding --data DIR [--base base] [--out DIR] [PRESET ...]``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

PRESETS = ("fedavg", "lora", "lora-1client", "lora-nf4", "fedprox", "fedshampoo", "dp-fedavg",
           "dp-lora", "dp-clgecl", "dp-clgecl-lora", "fedavg-ft", "local-only")  # fmt: skip


def train_once(preset: str, data: Path, base: str, out: Path, epsilon: float) -> str | None:
    """Train one preset for one round unless its run exists; the error output on failure."""
    from click.testing import CliRunner

    from baselines.cli import train

    if (out / "submission.json").is_file():
        return None
    args = ["--method", preset, "--data", str(data), "--out", str(out), "--base", base,
            "--val-limit", "2", "--threads", "1", "--no-progress", "--local-epochs", "1"]  # fmt: skip
    if preset.startswith("dp-"):
        args += ["--epsilon", str(epsilon)]
    if preset != "local-only":
        args += ["--rounds", "1"]
    result = CliRunner().invoke(train, args)
    return None if result.exit_code == 0 else result.output[-2000:]


def bind_run(run: Path, scorer) -> tuple[str, float]:  # type: ignore[no-untyped-def]
    """The worker's binding checks on a run directory: (outcome, seconds)."""
    from benchmark.tracks import get_track
    from evaluator.submission_metadata import SubmissionMetadata
    from evaluator.validation.binding import bind
    from evaluator.validation.commdetails import read_details
    from evaluator.validation.commlog import declared_shape, parse_log
    from evaluator.validation.errors import InvalidSubmission

    meta = json.loads((run / "submission.json").read_text())
    declared = SubmissionMetadata.model_validate(meta)
    started = time.perf_counter()
    try:
        tally = parse_log(run / "communication_log.csv", clients=scorer.clients,
                          max_bytes=1 << 30, max_rows=10**6,
                          **declared_shape(declared, get_track(declared.track)))  # fmt: skip
        messages = read_details(run / "communication_log.jsonl", tally.rows,
                                max_bytes=1 << 32, max_parameters=10**5)  # fmt: skip
        report = bind(run / "checkpoint" / "model.safetensors", scorer.reference, meta, tally,
                      messages, clients=scorer.clients)  # fmt: skip
    except InvalidSubmission as error:
        return f"REJECTED {error}", time.perf_counter() - started
    return f"PASS {report.summary()}", time.perf_counter() - started


def main() -> None:
    """Train, bind and print every preset."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("presets", nargs="*", default=list(PRESETS))
    parser.add_argument("--data", type=Path, required=True, help="benchmark directory")
    parser.add_argument("--base", default="base", help="base model (the evaluator's reference)")
    parser.add_argument("--out", type=Path, default=Path(".bench/binding"))
    parser.add_argument("--epsilon", type=float, default=8.0, help="epsilon of the DP presets")
    args = parser.parse_args()

    from evaluator.scoring import Scorer

    scorer = Scorer(args.data, reference_model=args.base)
    started = time.perf_counter()
    _ = scorer.reference
    print(f"reference model's names read in {time.perf_counter() - started:.2f} s", flush=True)
    for preset in args.presets:
        failure = train_once(preset, args.data, args.base, args.out / preset, args.epsilon)
        if failure is not None:
            print(f"{preset}: training failed\n{failure}", flush=True)
            continue
        outcome, seconds = bind_run(args.out / preset, scorer)
        print(f"{preset}: {outcome} in {seconds:.3f} s", flush=True)


if __name__ == "__main__":
    main()
