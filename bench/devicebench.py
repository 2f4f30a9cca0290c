"""The prediction loop on a GPU against the CPU: same answers, and how much faster.

Two models, each scored on the same val questions on every setting of :data:`SETTINGS`:

- the shipped ``base`` (the kit's tiny VT5) on a whole ``mini`` val split;
- a randomly initialised VT5 of the real shape (T5-base + DiT-base, :func:`base_vt5_config`,
  with the shipped tokenizer), on the first ``--real-size-questions`` of them: its answers are
  noise, but its speed and memory are those of the competition's model.

For every setting it prints and writes (``--out``, JSON) the ANLS, how many answers equal the
CPU fp32 ones, the seconds and questions per second of the loop (tokenising and the page images
included), and the peak GPU memory. fp32 should give the CPU's answers (a few may differ where
two tokens' logits tie within float error); bf16 is autocast and is not expected to.

With ``--audit-data`` (a benchmark generated with ``--canaries``), it also times the privacy
audit's pass (:meth:`evaluator.canary_audit.CanaryAudit.loglik`, every probe once) beside
scoring the whole test split, per model and device (the real-size model on the GPU only: on the
CPU it would take most of an hour), and gives the largest difference between the CPU's and the
GPU's log-likelihoods for the shipped base.

Usage: ``python -m bench.devicebench --data DIR [--real-size-questions N] [--audit-data DIR]
[--out FILE]`` (``DIR``: a generated benchmark, e.g. ``pflkit data generate --scale mini --out
DIR``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

#: (device, precision) pairs; the first is the reference the others are compared with
SETTINGS = (("cpu", "fp32"), ("cuda", "fp32"), ("cuda", "bf16"))
#: the audit's devices: the reference, then the GPU
AUDIT_DEVICES = ("cpu", "cuda")


def real_size_model(processor: Any, seed: int = 0) -> tuple[Any, Any]:
    """A randomly initialised VT5 of the real shape with the shipped tokenizer, and its
    processor."""
    import torch

    from benchmark.model.modeling_vt5 import VT5ForConditionalGeneration
    from benchmark.model.presets import base_vt5_config
    from benchmark.model.processing_vt5 import VT5Processor

    config = base_vt5_config(len(processor.tokenizer), box_scale=processor.box_scale,
                             max_input_tokens=processor.max_input_tokens,
                             max_answer_tokens=processor.max_answer_tokens)
    torch.manual_seed(seed)
    return VT5ForConditionalGeneration(config).eval(), VT5Processor.from_config(
        processor.tokenizer, config)


def score(model: Any, processor: Any, dataset: Any, device: str, precision: str
          ) -> tuple[dict[str, Any], list[str]]:
    """The loop's figures on one setting, and its answers."""
    import torch

    from benchmark.evaluation import evaluate

    model.to(device)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    result = evaluate(model, processor, dataset, progress=False, precision=precision)
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    figures = {"device": device, "precision": precision, "questions": len(dataset),
               "anls": round(result.anls, 4), "seconds": round(seconds, 2),
               "questions_per_second": round(len(dataset) / seconds, 1)}
    if device == "cuda":
        figures["peak_gpu_mib"] = round(torch.cuda.max_memory_allocated() / 2**20)
        figures["gpu"] = torch.cuda.get_device_name()
    model.to("cpu")
    return figures, [p.prediction for p in result.predictions]


def compare(name: str, model: Any, processor: Any, dataset: Any) -> list[dict[str, Any]]:
    """Every setting on one model; each row counts the answers equal to the first setting's."""
    rows, reference = [], None
    for device, precision in SETTINGS:
        figures, answers = score(model, processor, dataset, device, precision)
        reference = answers if reference is None else reference
        figures["answers_equal_to_cpu_fp32"] = sum(a == b for a, b in zip(answers, reference, strict=True))
        rows.append({"model": name, **figures})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def audit_costs(models: dict[str, tuple[Any, Any]], data: Any) -> list[dict[str, Any]]:
    """Seconds of the audit's pass and of scoring the test split, per model and device.

    Args:
        models: name -> (model, processor); the first is also run on the CPU.
        data: a benchmark directory with canaries.
    """
    import numpy as np

    from benchmark.data import load_split
    from evaluator.canary_audit import CanaryAudit

    audit = CanaryAudit(data, "base")
    audit.prepare()  # probes encoded and pages decoded once, as in a worker, before the timing
    test = load_split(data, "test")
    rows = []
    for position, (name, (model, processor)) in enumerate(models.items()):
        reference_loglik = None
        for device in AUDIT_DEVICES if position == 0 else AUDIT_DEVICES[1:]:
            model.to(device)
            started = time.perf_counter()
            loglik = audit.loglik(model)
            audit_seconds = time.perf_counter() - started
            model.to("cpu")
            scored, _ = score(model, processor, test, device, "fp32")
            row = {"model": name, "device": device, "probes": len(loglik),
                   "audit_seconds": round(audit_seconds, 2), "test_questions": len(test),
                   "scoring_seconds": scored["seconds"]}
            if reference_loglik is None:
                reference_loglik = loglik
            else:
                row["largest_loglik_difference_to_cpu"] = float(
                    np.max(np.abs(loglik - reference_loglik)))
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    """Score both models on every setting; print and write the rows."""
    import torch

    from benchmark.data import load_split
    from benchmark.model import load_model, load_processor

    parser = argparse.ArgumentParser(prog="python -m bench.devicebench",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="a generated benchmark")
    parser.add_argument("--real-size-questions", type=int, default=200,
                        help="val questions for the real-size model")
    parser.add_argument("--audit-data", type=Path,
                        help="a benchmark with canaries: also time the audit's pass")
    parser.add_argument("--out", type=Path, help="write the rows here (JSON)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        parser.error("torch sees no CUDA GPU here: this benchmark compares CPU and GPU")
    val = load_split(args.data, "val")
    processor = load_processor("base")
    base = load_model("base").eval()
    rows = compare("base (shipped tiny VT5)", base, processor, val)
    big, big_processor = real_size_model(processor)
    count = sum(p.numel() for p in big.parameters())
    big_name = f"random VT5-base shape ({count / 1e6:.0f}M parameters)"
    rows += compare(big_name, big, big_processor,
                    val.select(range(min(args.real_size_questions, len(val)))))
    if args.audit_data is not None:
        rows += audit_costs({"base (shipped tiny VT5)": (base, processor),
                             big_name: (big, big_processor)}, args.audit_data)
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
