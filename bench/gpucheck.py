"""The GPU check: the kit's training on CUDA, then side by side with the official starter kit.

One command runs every step in order, each in a process of its own with a time limit, inside a
total budget (a step that would not fit is skipped and says so); each writes ``OUT/STEP.json``
and ``OUT/STEP.log``, and ``OUT/gpucheck.json`` gathers them. Made for one 10-minute call of a
lent GPU; with ``--device cpu --shape tiny`` the same steps run here on the CPU in about two
minutes (``tests/bench/test_gpucheck.py`` does so).

Steps:

1. ``environment``: the GPU, torch, transformers, peft, bitsandbytes, opacus.
2. ``prepare``: generated ``tiny`` data (and ``mini`` for the real shape), a random VT5 of
   ``--shape`` in the official layout and in the kit's (:mod:`bench.public_export`).
3. ``tests``: the tests marked ``cuda`` (``tests/baselines/test_device_training.py``: every
   preset's short round on ``tiny`` at fp32 and bf16 against the CPU; and
   ``tests/baselines/test_official_training.py`` on the device) with
   ``PFLKIT_TEST_DEVICE=--device``.
4. ``real_size_steps``: one ``fedavg`` and one ``lora`` local step of the ``--shape`` model.
5. ``train_throughput``: examples per second over the same batches of 10: the official
   ``fl_train`` loop (in its own environment, ``--official-site``) against the kit's ``fedavg``
   at fp32 and bf16 (per-step losses side by side, from the same weights and batch order,
   dropout off on both), ``lora`` r6 on q,v and ``dp-lora`` at m providers.
6. ``scoring_throughput``: the official ``eval.py`` loop against the kit's prediction loop
   (fp32 and bf16) on the whole test split, and how many answers equal the official ones.
7. ``memory_24gb``: peak memory of ``fedavg`` full fine-tuning at batch size 10 with bf16,
   gradient checkpointing, 8-bit AdamW, each alone and together.
8. ``round``: one whole round of ``fedavg`` (2 clients) and of ``dp-lora-competition``:
   wall time split into setup, client training, evaluation and the rest (aggregation,
   encoding, logging).

Usage::

    python -m bench.gpucheck --out DIR [--device cuda] [--shape vt5-base] \\
        [--official-site .gpu/official-site --official-code .gpu/official-code] [--budget 540]

``make gpu-wheels`` fills ``.gpu/`` (the wheels the GPU machine lacks, the official
environment's wheels, and the official code from a local clone); ``docs/participants/gpu.md``
says how to run it on a lent GPU.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: untimed first steps of each training loop (CUDA kernels, allocator, caches)
WARMUP_STEPS = 1
#: GPU memory a participant's card is assumed to have
BUDGET_24GB = 24 * 2**30


@dataclass(frozen=True)
class Step:
    """One step of the check: its name, its time limit (seconds) and what it runs."""

    name: str
    limit: float
    run: Callable[[argparse.Namespace], dict[str, Any]]


def _work(args: argparse.Namespace) -> Path:
    return args.work or args.out / "work"


def _real(args: argparse.Namespace) -> bool:
    return args.shape == "vt5-base"


def _data(args: argparse.Namespace) -> Path:
    """The measurements' benchmark: ``mini`` for the real shape, ``tiny`` otherwise."""
    return _work(args) / ("mini" if _real(args) else "tiny")


def _synchronize(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def environment(args: argparse.Namespace) -> dict[str, Any]:
    """Versions and the device."""
    import importlib.metadata
    import platform

    import torch

    versions = {}
    for package in ("torch", "transformers", "peft", "bitsandbytes", "opacus", "safetensors"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    cuda = torch.cuda.is_available()
    return {
        "python": platform.python_version(),
        "packages": versions,
        "cuda_available": cuda,
        "gpu": torch.cuda.get_device_name() if cuda else None,
        "gpu_memory_bytes": torch.cuda.get_device_properties(0).total_memory if cuda else None,
        "torch_cuda": torch.version.cuda,
        "cpu": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
    }


def prepare(args: argparse.Namespace) -> dict[str, Any]:
    """The generated data and the two layouts of one random model."""
    from bench.public_export import write_random_public_vt5
    from benchmark.data.synthetic.benchmark import generate_benchmark

    work = _work(args)
    workers = max(1, min(8, (os.cpu_count() or 2) - 1))
    started = time.perf_counter()
    scales = ["tiny", "mini"] if _real(args) else ["tiny"]
    for scale in scales:
        if not (work / scale / "benchmark.json").is_file():
            generate_benchmark(work / scale, scale, public_documents=0, workers=workers,
                               progress=False)  # fmt: skip
    data_seconds = time.perf_counter() - started
    if not (work / "model" / "kit" / "config.json").is_file():
        write_random_public_vt5(work / "model", args.shape)
    from benchmark.model import load_model

    parameters = sum(p.numel() for p in load_model(work / "model" / "kit").parameters())
    return {"scales": scales, "data_seconds": round(data_seconds, 1),
            "model_seconds": round(time.perf_counter() - started - data_seconds, 1),
            "shape": args.shape, "parameters": parameters}  # fmt: skip


def run_tests(args: argparse.Namespace) -> dict[str, Any]:
    """The tests marked ``cuda`` on ``--device``; pytest's summary and JUnit counts."""
    import xml.etree.ElementTree as ElementTree

    report = args.out / "tests.xml"
    env = {**os.environ, "PFLKIT_TEST_DEVICE": args.device}
    if args.test_presets:
        env["PFLKIT_TEST_PRESETS"] = args.test_presets
    # on a GPU machine's cores, four workers share the GPU (19 presets' runs took 92 to 152 s
    # in one process on the H200); the CPU rehearsal stays in one process
    workers = (["-n", "4"] if args.device.startswith("cuda") and importlib.util.find_spec("xdist")
               else [])  # fmt: skip
    command = [sys.executable, "-m", "pytest", "-m", "cuda", "-q", "-p", "no:cacheprovider",
               *workers, "--junitxml", str(report), "tests/baselines/test_device_training.py",
               "tests/baselines/test_official_training.py"]  # fmt: skip
    completed = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    print(completed.stdout[-20000:], completed.stderr[-5000:], sep="\n")
    suite = ElementTree.parse(report).getroot()
    suite = suite if suite.tag == "testsuite" else suite[0]
    counts = {key: int(suite.get(key, 0)) for key in ("tests", "failures", "errors", "skipped")}
    failed = [case.get("name") for case in suite.iter("testcase")
              if case.find("failure") is not None or case.find("error") is not None]  # fmt: skip
    return {"exit_code": completed.returncode, **counts, "failed": failed,
            "passed": counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]}


def _measure(args: argparse.Namespace, preset: str, setting: str, **options: Any
             ) -> dict[str, Any]:  # fmt: skip
    from bench.trainbench import measure

    return measure(preset, setting, data=_data(args), base=str(_work(args) / "model" / "kit"),
                   device=args.device, batch_size=10, examples=options.pop("examples", 10),
                   providers=options.pop("providers", None))  # fmt: skip


def real_size_steps(args: argparse.Namespace) -> dict[str, Any]:
    """One local step of ``fedavg`` and of ``lora`` (r6 on q,v) at fp32: finite losses."""
    rows = [_measure(args, preset, "fp32") for preset in ("fedavg", "lora-qv-r6")]
    return {"rows": rows, "finite": all(math.isfinite(row["loss"]) for row in rows)}


def largest_client(data: Path) -> int:
    """The client with the most training questions (the training loops' batches come from it)."""
    from benchmark.data.reader import count_clients, load_split

    sizes = {client: len(load_split(data, "train", client)) for client in range(count_clients(data))}
    return max(sizes, key=lambda client: (sizes[client], -client))


def dp_providers(args: argparse.Namespace) -> int:
    """m of the DP measurements: the competition's 50 at the real shape (2 on ``tiny``), at most
    the fewest providers at a client of the data (``mini`` has a client of 12; m > N is refused)."""
    from baselines.privacy.plan import min_providers
    from benchmark.data.reader import count_clients, load_split

    data = _data(args)
    fewest = min_providers([load_split(data, "train", client)["provider"]
                            for client in range(count_clients(data))])  # fmt: skip
    return min(50 if _real(args) else 2, fewest)


def kit_local_loop(args: argparse.Namespace, precision: str, steps: int) -> dict[str, Any]:
    """The kit's ``fedavg`` client loop on the largest client's batches of 10, dropout off:
    per-step losses, the batches' question ids in order, examples per second after warm-up."""
    import torch

    from baselines.engine.document_task import build_task
    from baselines.engine.local_training import LocalTrainer
    from baselines.presets import preset_config

    config = preset_config("fedavg")
    client = largest_client(_data(args))
    task = build_task(_data(args), _work(args) / "model" / "kit", val_limit=0,
                          clients=[client], progress=False)  # fmt: skip
    own = task.client_data[client]
    rows = own.select(range(min(10 * steps, len(own))))
    model = config.build_method().prepare(task.build_model(), seed=0)
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        elif isinstance(getattr(module, "dropout", None), float):
            module.dropout = 0.0
    model.to(args.device)
    order: list[list[str]] = []
    losses: list[float] = []
    started: list[float] = []

    def collate(batch_rows: list[dict]) -> dict:
        if len(order) == WARMUP_STEPS:  # timed from here, as the official side is
            _synchronize(args.device)
            started.append(time.perf_counter())
        order.append([str(row["question_id"]) for row in batch_rows])
        return task.collate(batch_rows)

    def loss(batch: dict, outputs: Any) -> Any:
        losses.append(float(outputs.loss.detach()))
        return outputs.loss

    trainer = LocalTrainer(collate, epochs=1, batch_size=10, optimizer=config.build_optimizer(),
                           precision=precision)  # fmt: skip
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    trainer.train(model, rows, seed=0, loss=loss)
    _synchronize(args.device)
    timed = sum(len(batch) for batch in order[WARMUP_STEPS:])
    seconds = time.perf_counter() - started[0] if started else 0.0
    return {"side": "kit", "setting": f"fedavg {precision}", "client": client, "losses": losses,
            "order": order,
            "timed_examples": timed, "seconds": seconds,
            "examples_per_second": timed / seconds if seconds > 0 else None,
            "peak_memory_bytes": (torch.cuda.max_memory_allocated()
                                  if args.device.startswith("cuda") else None),
            "lr": config.build_optimizer().lr}  # fmt: skip


def official(args: argparse.Namespace, loop: str, name: str, *options: str) -> dict[str, Any]:
    """Run :mod:`bench.official_side` in the official environment; its JSON, or why not."""
    if args.official_site is None or args.official_code is None:
        return {"skipped": "no official environment (--official-site and --official-code)"}
    out = args.out / f"{name}.json"
    model = _work(args) / "model"
    env = {**os.environ, "PYTHONPATH": f"{args.official_site}:{args.official_code}"}
    command = [args.official_python, str(Path(__file__).with_name("official_side.py")), loop,
               "--public", str(model / "public"), "--dit", str(model / "dit"),
               "--device", args.device, "--out", str(out), *options]  # fmt: skip
    completed = subprocess.run(command, env=env, capture_output=True, text=True, check=False,
                               cwd=args.official_code)  # fmt: skip
    print(completed.stdout[-5000:], completed.stderr[-10000:], sep="\n")
    if completed.returncode != 0:
        return {"failed": completed.stderr[-3000:]}
    return json.loads(out.read_text())


def train_throughput(args: argparse.Namespace) -> dict[str, Any]:
    """Examples per second of the official loop and of the kit's settings, and the losses."""
    steps = args.train_steps
    kit = {precision: kit_local_loop(args, precision, steps) for precision in ("fp32", "bf16")}
    order = args.out / "train_order.json"
    order.write_text(json.dumps(kit["fp32"]["order"]))
    data = _data(args) / "participant"
    theirs = official(args, "train", "official_train", "--imdb-dir", str(data),
                      "--images-dir", str(data / "images"), "--split", "train",
                      "--client", str(kit["fp32"]["client"]),
                      "--order", str(order), "--lr", str(kit["fp32"]["lr"]),
                      "--warmup", str(WARMUP_STEPS))  # fmt: skip
    providers = dp_providers(args)
    others = [_measure(args, "lora-qv-r6", precision, examples=10 * steps)
              for precision in ("fp32", "bf16")]  # fmt: skip
    others.append(_measure(args, "dp-lora", "fp32", providers=providers))
    reference = theirs.get("examples_per_second")
    speedups = {
        name: row["examples_per_second"] / reference
        for name, row in [("fedavg fp32", kit["fp32"]), ("fedavg bf16", kit["bf16"])]
        if reference and row["examples_per_second"]
    }
    side_by_side = [
        {"step": i, "official": theirs.get("losses", [None] * (i + 1))[i] if "losses" in theirs
         else None, "kit_fp32": kit["fp32"]["losses"][i], "kit_bf16": kit["bf16"]["losses"][i]}
        for i in range(len(kit["fp32"]["losses"]))
    ]  # fmt: skip
    for row in side_by_side:
        print(json.dumps(row))
    for row in kit.values():
        row.pop("order")
    return {"official": theirs, "kit": kit, "other_presets": others, "losses": side_by_side,
            "speedup_over_official": speedups, "goal": {"fedavg bf16": 3.0, "fedavg fp32": 1.5}}


#: how the official slow tokenizer decodes an id past its pieces; the kit's decode drops it
OUT_OF_VOCABULARY = re.compile(r"<extra_id_-\d+>")


def in_vocabulary(answer: str) -> str:
    """An official answer without the ids past the tokenizer's pieces. The random real-shape
    model has the public 32,128 token rows and the shipped 4,000-piece tokenizer, so it generates
    ids that no piece names: the official T5Tokenizer writes them ``<extra_id_-N>``, the kit's
    decode writes nothing. On the H200 (2026-11-28) every one of the 1,015 official answers was
    such ids alone (one id repeated to the length bound), so at the real shape equal answers say
    little; the CPU rehearsal on the tiny model compares answers that mean something."""
    return OUT_OF_VOCABULARY.sub("", answer).strip()


def scoring_throughput(args: argparse.Namespace) -> dict[str, Any]:
    """The whole test split through the official eval loop and the kit's, fp32 and bf16."""
    from bench.devicebench import score
    from benchmark.data import load_split
    from benchmark.model import load_model, load_processor

    kit_dir = _work(args) / "model" / "kit"
    test = load_split(_data(args), "test")
    model, processor = load_model(kit_dir).eval(), load_processor(kit_dir)
    rows, answers = [], {}
    for precision in ("fp32", "bf16"):
        figures, predicted = score(model, processor, test, args.device, precision)
        answers[precision] = dict(zip(map(str, test["question_id"]), predicted, strict=True))
        rows.append(figures)
    data = _data(args) / "evaluator"
    theirs = official(args, "eval", "official_eval", "--imdb-dir", str(data),
                      "--images-dir", str(data / "images"), "--split", "test")  # fmt: skip
    result: dict[str, Any] = {"kit": rows, "official": {k: v for k, v in theirs.items()
                                                         if k != "answers"}}  # fmt: skip
    if "answers" in theirs:
        official_answers = {qid: in_vocabulary(answer) for qid, answer in theirs["answers"].items()}
        for row, precision in zip(rows, ("fp32", "bf16"), strict=True):
            row["answers_equal_to_official"] = sum(
                answers[precision].get(qid, "").strip() == answer
                for qid, answer in official_answers.items())  # fmt: skip
            row["speedup_over_official"] = (row["questions_per_second"]
                                            / theirs["questions_per_second"])  # fmt: skip
        result["differing_fp32"] = [
            {"question_id": qid, "official": answer, "kit": answers["fp32"].get(qid)}
            for qid, answer in official_answers.items()
            if answers["fp32"].get(qid, "").strip() != answer
        ][:20]  # fmt: skip
    result["goal"] = {"bf16 speedup": 5.0, "fp32 answers": "all equal"}
    return result


def memory_24gb(args: argparse.Namespace) -> dict[str, Any]:
    """Peak memory of ``fedavg`` at batch size 10 per setting; which fit in 24 GB."""
    rows = []
    for setting in ("fp32", "bf16", "fp32+gc", "fp32+8bit", "bf16+gc+8bit"):
        try:
            row = _measure(args, "fedavg", setting, examples=20)
        except Exception as error:  # an out-of-memory is a figure here, not a failure
            row = {"preset": "fedavg", "setting": setting, "error": repr(error)[:500]}
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        if "peak_memory_bytes" in row:
            row["fits_24gb"] = row["peak_memory_bytes"] <= BUDGET_24GB
        rows.append(row)
        print(json.dumps(row), flush=True)
    fitting = [row["setting"] for row in rows if row.get("fits_24gb")]
    return {"rows": rows, "smallest_fitting": fitting[:1], "fitting": fitting}


def whole_round(args: argparse.Namespace) -> dict[str, Any]:
    """One round of ``fedavg`` (2 clients) and of ``dp-lora-competition``, through
    ``pflkit train``: setup, client training, evaluation and the rest."""
    rows = []
    providers = str(dp_providers(args))
    runs = {
        "fedavg": ("--clients-per-round", "2", "--local-epochs", "1"),
        "dp-lora-competition": ("--noise-multiplier", "1.145", "--providers-per-round", providers),
    }
    for preset, extra in runs.items():
        out = _work(args) / "runs" / preset
        command = [sys.executable, "-m", "pflkit.cli", "train", "--preset", preset, "--data",
                   str(_data(args)), "--base", str(_work(args) / "model" / "kit"), "--out",
                   str(out), "--rounds", "1", "--device", args.device, "--val-limit",
                   str(args.round_val), "--no-progress", *extra]  # fmt: skip
        started = time.perf_counter()
        completed = subprocess.run(command, capture_output=True, text=True, check=False)
        process = time.perf_counter() - started
        print(completed.stdout[-3000:], completed.stderr[-5000:], sep="\n")
        if completed.returncode != 0:
            rows.append({"preset": preset, "failed": completed.stderr[-2000:]})
            continue
        metrics = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
        wall = metrics["wall_seconds"]
        training, evaluation = metrics["client_training_seconds"], metrics["evaluation_seconds"]
        rows.append({"preset": preset, "process_seconds": round(process, 2),
                     "setup_seconds": round(process - wall, 2), "round_seconds": round(wall, 2),
                     "client_training_seconds": round(training, 2),
                     "evaluation_seconds": round(evaluation, 2),
                     "aggregation_encoding_logging_seconds": round(wall - training - evaluation, 2),
                     "round_bytes": metrics["round_bytes"]})  # fmt: skip
    return {"rows": rows}


STEPS = (
    Step("environment", 60, environment),
    Step("prepare", 200, prepare),
    Step("tests", 150, run_tests),
    Step("real_size_steps", 60, real_size_steps),
    Step("train_throughput", 150, train_throughput),
    Step("scoring_throughput", 120, scoring_throughput),
    Step("memory_24gb", 120, memory_24gb),
    Step("round", 120, whole_round),
)


def run_step(step: Step, args: argparse.Namespace) -> None:
    """In the step's own process: run it and write ``OUT/NAME.json``."""
    result = step.run(args)
    (args.out / f"{step.name}.json").write_text(json.dumps(result, indent=1, default=str) + "\n")


def orchestrate(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    """Every selected step in its own process, each within its limit and the budget left."""
    deadline = time.monotonic() + args.budget
    chosen = [step for step in STEPS if not args.steps or step.name in args.steps]
    summary: dict[str, Any] = {"device": args.device, "shape": args.shape, "steps": {}}
    for step in chosen:
        left = deadline - time.monotonic()
        if left < min(step.limit, 20):
            summary["steps"][step.name] = {"status": "skipped", "why": f"{left:.0f} s of budget left"}
            continue
        limit = min(step.limit * args.limit_scale, left)
        log = args.out / f"{step.name}.log"
        started = time.monotonic()
        with log.open("w") as handle:
            try:
                completed = subprocess.run(
                    [sys.executable, "-m", "bench.gpucheck", *argv, "--run-step", step.name],
                    stdout=handle, stderr=subprocess.STDOUT, timeout=limit, check=False)
                status = "ok" if completed.returncode == 0 else f"failed (exit {completed.returncode})"
            except subprocess.TimeoutExpired:
                status = f"timed out after {limit:.0f} s"
        entry: dict[str, Any] = {"status": status, "seconds": round(time.monotonic() - started, 1)}
        result = args.out / f"{step.name}.json"
        if status == "ok" and result.is_file():
            entry["result"] = json.loads(result.read_text())
        elif status != "ok":
            entry["log_tail"] = log.read_text(errors="replace")[-3000:]
        summary["steps"][step.name] = entry
        print(f"{step.name:>20}: {status} in {entry['seconds']} s", flush=True)
        (args.out / "gpucheck.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    return summary


def parser() -> argparse.ArgumentParser:
    """The command line."""
    p = argparse.ArgumentParser(prog="python -m bench.gpucheck",
                                description=__doc__.splitlines()[0])  # fmt: skip
    p.add_argument("--out", type=Path, required=True, help="the JSON and the logs")
    p.add_argument("--work", type=Path, help="data, models and runs (default: OUT/work)")
    p.add_argument("--device", default="cuda", help="cuda, cuda:N, or cpu for the rehearsal")
    p.add_argument("--shape", default="vt5-base", choices=("tiny", "vt5-base"))
    p.add_argument("--official-site", type=Path, help="the official environment's packages")
    p.add_argument("--official-code", type=Path, help="a checkout of the official starter kit")
    p.add_argument("--official-python", default=sys.executable)
    p.add_argument("--budget", type=float, default=540.0, help="seconds for every step together")
    p.add_argument("--limit-scale", type=float, default=1.0, help="multiplies every step's limit")
    p.add_argument("--steps", nargs="*", help="only these steps (default: all)")
    p.add_argument("--test-presets", help="the tests step's presets (default: every preset)")
    p.add_argument("--train-steps", type=int, default=12, help="batches of 10 per training loop")
    p.add_argument("--round-val", type=int, default=20, help="val questions of the round step")
    p.add_argument("--run-step", help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> None:
    """Run the check, or (``--run-step``) one step of it."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    args.out = args.out.resolve()
    for name in ("official_site", "official_code", "work"):
        if getattr(args, name) is not None:
            setattr(args, name, getattr(args, name).resolve())
    if args.run_step:
        run_step(next(step for step in STEPS if step.name == args.run_step), args)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    summary = orchestrate(args, argv)
    failed = [name for name, entry in summary["steps"].items() if entry["status"] != "ok"]
    print(json.dumps({"failed_or_skipped": failed}))


if __name__ == "__main__":
    main()
