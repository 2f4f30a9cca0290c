"""`make bench`: the kit's evaluation loop against a starter-kit-style loop, same model and data.

Both loops score the same checkpoint on the same questions in one run:

- reference: configured like the public PFL-DocVQA starter kit: batches of 10 in file order,
  tokenised batch by batch, every input padded to 512 tokens, page images decoded per question,
  transformers `generate` (greedy, max length 20), fp32, `torch.no_grad`;
- kit: `benchmark.evaluation.predict`: tokenised once (each distinct word once per batch),
  length-grouped batches, visual tokens once per page (images decoded a batch ahead),
  `torch.inference_mode`, an encoder whose attention runs over each question's own positions
  (`benchmark.model.encoding`), a cached greedy loop whose cross-attention folds the keys and
  values into its query and output (`benchmark.model.decoding`), stopped when every answer has
  ended, the same answer bound (19 new tokens = max length 20 with the start token), and as
  many batches side by side as torch has threads, each on one.

The loops alternate over parts of the questions so that both see the same load on a shared
machine. It prints both throughputs (questions/s), their ratio (target: >= 5x on the shipped
base) and checks that both give the same predictions and ANLS. Without the shipped `base` model
it uses a randomly initialised tiny model (scores are then meaningless; speed and equality still
hold). `--threads N` sets torch's threads for both loops (default: torch's, one per core).

Usage: `python -m bench.bench [--checkpoint DIR|base] [--data DIR] [--split val] [--limit N]
[--threads N]`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from experiments.results_file import Column, append_results_rows

REFERENCE_BATCH_SIZE = 10
REFERENCE_PAD_TO = 512
REFERENCE_MAX_LENGTH = 20


def reference_predict(model, processor, dataset) -> list[str]:
    """Starter-kit-style loop: file order, batches of 10, padding to 512, `generate` max length 20."""
    import torch

    predictions: list[str] = []
    model.eval()
    with torch.no_grad():
        for start in range(0, len(dataset), REFERENCE_BATCH_SIZE):
            rows = dataset[start : start + REFERENCE_BATCH_SIZE]
            encoded = processor.encode_batch(rows["question"], rows["ocr_tokens"], rows["ocr_boxes"])
            features = [
                {"input_ids": ids, "input_boxes": boxes, "image_path": path}
                for ids, boxes, path in zip(
                    encoded["input_ids"], encoded["input_boxes"], rows["image_path"], strict=True
                )
            ]
            batch = processor.collate(features, pad_to=REFERENCE_PAD_TO)
            embeds, mask = model.embed(**batch)
            output = model.language_backbone.generate(
                inputs_embeds=embeds,
                attention_mask=mask,
                max_length=REFERENCE_MAX_LENGTH,
                num_beams=1,
                do_sample=False,
            )
            predictions.extend(processor.decode(output))
    return predictions


def corpus_lines(records: Any) -> list[str]:
    """A split's text as the model reads it (prompted questions, page words, answers)."""
    lines = []
    for record in records:
        lines.append(f"question: {record['question']}  context: ")
        lines.append(" ".join(record["ocr_tokens"]))
        lines.extend(record["answers"])
    return lines


def random_tiny_checkpoint(data_dir: Path, out_dir: Path) -> Path:
    """A randomly initialised tiny VT5 with a tokenizer trained on the data's public corpus."""
    from benchmark.data import load_split
    from benchmark.model import save_checkpoint
    from benchmark.model.random_init import random_tiny_model

    corpus = load_split(data_dir, "train") if (data_dir / "imdb_train.npy").is_file() else (
        load_split(data_dir / "public", "train")
    )
    model, processor = random_tiny_model(
        corpus_lines(corpus), out_dir / "tokenizer", vocab_size=4000, seed=0,
        hard_vocab_limit=False,
    )  # fmt: skip
    return save_checkpoint(model, processor, out_dir / "random-tiny")


def run(args: argparse.Namespace) -> dict:
    """Score one checkpoint with both loops; returns the measurements."""
    import torch
    from transformers.utils import logging as hf_logging

    from benchmark.data import load_split
    from benchmark.data.synthetic import generate_benchmark
    from benchmark.evaluation import predict, score_predictions
    from benchmark.model import BASE_MODEL_DIR, load_model, load_processor

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    if args.threads:
        torch.set_num_threads(args.threads)
    work = Path(tempfile.mkdtemp(prefix="pflkit-bench-"))
    data_dir = Path(args.data) if args.data else None
    if data_dir is None:
        data_dir = work / "data"
        print(f"generating `mini` benchmark data in {data_dir} ...", flush=True)
        generate_benchmark(data_dir, "mini", seed=0, public_documents=400, progress=False)
    checkpoint = args.checkpoint
    note = ""
    if checkpoint == "base" and not (BASE_MODEL_DIR / "config.json").is_file():
        checkpoint = str(random_tiny_checkpoint(data_dir, work))
        note = ("RANDOMLY INITIALISED tiny model (the shipped base model does not exist yet; "
                "`pflkit pretrain` creates it): scores are meaningless, speed and equality hold")
    model = load_model(checkpoint)
    processor = load_processor(checkpoint)
    dataset = load_split(data_dir, args.split)
    if args.limit:
        dataset = dataset.select(range(min(args.limit, len(dataset))))
    print(f"checkpoint {checkpoint}; {len(dataset)} {args.split} questions; "
          f"torch threads {torch.get_num_threads()}; load average {os.getloadavg()[0]:.1f}", flush=True)
    if note:
        print(f"NOTE: {note}", flush=True)

    kit: list[str] = []
    reference: list[str] = []
    kit_seconds = kit_cpu = reference_seconds = reference_cpu = 0.0
    # The two loops alternate over parts of the questions, so that both see the same machine load.
    bounds = [round(i * len(dataset) / args.rounds) for i in range(args.rounds + 1)]
    for part, (lo, hi) in enumerate(zip(bounds, bounds[1:], strict=False)):
        questions = dataset.select(range(lo, hi))
        order = ("kit", "reference") if part % 2 == 0 else ("reference", "kit")
        for loop in order:
            start, cpu_start = time.perf_counter(), time.process_time()
            if loop == "kit":
                kit += predict(
                    model, processor, questions, batch_size=args.batch_size,
                    max_new_tokens=REFERENCE_MAX_LENGTH - 1, cache_dir=work / "cache",
                    progress=False,
                )
                kit_seconds += time.perf_counter() - start
                kit_cpu += time.process_time() - cpu_start
            else:
                reference += reference_predict(model, processor, questions)
                reference_seconds += time.perf_counter() - start
                reference_cpu += time.process_time() - cpu_start

    kit_result = score_predictions(dataset, kit, kit_seconds)
    reference_result = score_predictions(dataset, reference, reference_seconds)
    differing = sum(a != b for a, b in zip(kit, reference, strict=True))
    report = {
        "checkpoint": checkpoint,
        "note": note,
        "split": args.split,
        "questions": len(dataset),
        "threads": torch.get_num_threads(),
        "kit_questions_per_second": round(kit_result.questions_per_second, 2),
        "reference_questions_per_second": round(reference_result.questions_per_second, 2),
        "speedup": round(reference_seconds / kit_seconds, 2),
        # CPU seconds of this process: a steadier comparison on a machine shared with others
        "kit_cpu_seconds": round(kit_cpu, 1),
        "reference_cpu_seconds": round(reference_cpu, 1),
        "speedup_cpu_time": round(reference_cpu / kit_cpu, 2),
        "mean_input_tokens": round(
            sum(len(ids) for ids in processor.encode_batch(
                dataset["question"], dataset["ocr_tokens"], dataset["ocr_boxes"])["input_ids"])
            / max(len(dataset), 1), 1),
        "kit_anls": kit_result.anls,
        "reference_anls": reference_result.anls,
        "same_anls": abs(kit_result.anls - reference_result.anls) < 1e-9,
        "differing_predictions": differing,
        "load_average": round(os.getloadavg()[0], 1),
    }
    return report


#: The results table of :func:`record`: one row a run.
RECORD_COLUMNS = (
    Column("threads", "torch threads", format="int"),
    Column("kit", "kit questions/s", format=".2f"),
    Column("reference", "reference questions/s", format=".2f"),
    Column("speedup", "speed-up (wall)", format=".2fx"),
    Column("speedup_cpu", "speed-up (CPU time)", format=".2fx"),
    Column("differing", "answers differing"),
    Column("anls", "ANLS (both loops)", format=".4f"),
    Column("load", "load average", format=".1f"),
)


def record(path: Path, report: dict, *, command: str) -> None:
    """Add ``report`` as a row of the results table at ``path`` (rows of earlier runs kept
    when the file holds this table: :func:`experiments.results_file.append_results_rows`)."""
    row = {
        "threads": report["threads"], "kit": report["kit_questions_per_second"],
        "reference": report["reference_questions_per_second"], "speedup": report["speedup"],
        "speedup_cpu": report["speedup_cpu_time"],
        "differing": f"{report['differing_predictions']} / {report['questions']}",
        "anls": report["kit_anls"], "load": report["load_average"],
    }  # fmt: skip
    append_results_rows(path, RECORD_COLUMNS, [row], command=command)


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default="base", help="checkpoint directory or `base`")
    parser.add_argument("--data", default=None, help="data directory (default: generate `mini`)")
    parser.add_argument("--split", default="val", choices=["val", "test"])
    parser.add_argument("--limit", type=int, default=0, help="questions to score (0: all)")
    parser.add_argument("--batch-size", type=int, default=32, help="kit batch size")
    parser.add_argument("--threads", type=int, default=0,
                        help="torch threads for both loops (0: torch's default)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="parts of the questions on which the two loops alternate")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--record", type=Path, default=None,
                        help="add the run as a row of this results table's data file "
                             "(docs/results/data/NAME.json, shown by a results page)")
    args = parser.parse_args()
    report = run(args)
    if args.record is not None:
        record(args.record, report, command="python -m bench.bench " + " ".join(sys.argv[1:]))
    if args.json:
        print(json.dumps(report))
        return
    print(f"kit loop:       {report['kit_questions_per_second']:8.2f} questions/s  "
          f"ANLS {report['kit_anls']:.4f}")
    print(f"reference loop: {report['reference_questions_per_second']:8.2f} questions/s  "
          f"ANLS {report['reference_anls']:.4f}")
    print(f"CPU time: kit {report['kit_cpu_seconds']} s, reference {report['reference_cpu_seconds']} s "
          f"({report['speedup_cpu_time']:.2f}x); mean input {report['mean_input_tokens']} text tokens "
          f"(reference pads to {REFERENCE_PAD_TO}); load average {report['load_average']}")
    print(f"speed-up: {report['speedup']:.2f}x (target >= 5x); same ANLS: {report['same_anls']}; "
          f"differing predictions: {report['differing_predictions']}/{report['questions']}")
    if not report["same_anls"]:
        raise SystemExit("the two loops disagree on ANLS")


if __name__ == "__main__":
    main()
