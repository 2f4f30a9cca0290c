"""The official starter kit's local training and evaluation loops, timed, in its own environment.

Run by :mod:`bench.gpucheck` with the official code on ``PYTHONPATH`` (a checkout of
rubenpt91/PFL-DocVQA-Competition, never part of the kit) and the official environment's
transformers 4.27 before the kit's: it imports nothing of the kit. The loops are the official
ones, called through the official classes:

- **train**: ``train.py``'s ``fl_train`` inner loop on one provider's batches: the official
  ``VT5.forward(batch, return_pred_answer=True)`` (which also generates an answer for every
  batch), ``backward``, ``build_optimizer``'s AdamW step, ``zero_grad``, and the official
  ``Evaluator.get_metrics`` of the generated answers. The batches are the question ids the kit's
  side trained on, in its order (``--order``), so the per-step losses can be read side by side.
- **eval**: ``eval.py``'s ``evaluate`` loop over a split at the official batch size: the same
  forward under ``torch.no_grad`` and the metrics of every batch; the answers are written so
  that they can be compared with the kit's.

Dropout is switched off on both sides for the side-by-side losses (it draws random masks);
``--dropout`` keeps it as trained.

Usage (from :mod:`bench.gpucheck`)::

    PYTHONPATH=OFFICIAL_SITE:OFFICIAL_CODE python bench/official_side.py train \\
        --public DIR --dit DIR --imdb-dir DIR --images-dir DIR --split train --client 0 \\
        --order order.json --device cuda --out official-train.json
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

#: transformers 4.27 wants tokenizers < 0.14, which has no wheel for Python 3.12 (the GPU
#: machine's); the official code uses the slow (SentencePiece) T5Tokenizer and never calls the
#: fast one, so the environment carries tokenizers 0.15 (whose modules 4.27 imports) and its
#: import-time version check is told the version it asks for.
TOKENIZERS_VERSION_SEEN = "0.13.3"


def _tokenizers_version_as_asked() -> None:
    """transformers 4.27's import-time check reads tokenizers' version through this function."""
    import importlib.metadata

    real = importlib.metadata.version

    def version(name: str) -> str:
        return TOKENIZERS_VERSION_SEEN if name == "tokenizers" else real(name)

    importlib.metadata.version = version


def build(public: Path, dit: Path, device: str, dropout: bool) -> Any:
    """The official ``VT5`` as ``build_utils.build_model`` builds it, on ``device``."""
    import torch
    from models.VT5 import VT5

    config = SimpleNamespace(
        model_weights=str(public),
        max_input_tokens=512,
        visual_module={"model": "dit", "model_weights": str(dit), "finetune": False},
    )
    model = VT5(config)
    model.model.to(device)
    if not dropout:
        for module in model.model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0
            elif isinstance(getattr(module, "dropout", None), float):
                module.dropout = 0.0
    return model


def dataset(imdb_dir: Path, images_dir: Path, split: str, client: int | None) -> Any:
    """The official ``PFL_DocVQA`` dataset of a split (a client's, when ``client`` is given)."""
    from datasets.PFL_DocVQA import PFL_DocVQA

    kwargs: dict[str, Any] = {"get_raw_ocr_data": True, "use_images": True}
    if client is not None:
        kwargs["client_id"] = client
    return PFL_DocVQA(str(imdb_dir), str(images_dir), split, kwargs)


def _synchronize(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _peak_memory(device: str) -> int | None:
    import torch

    return int(torch.cuda.max_memory_allocated()) if device.startswith("cuda") else None


def train(args: argparse.Namespace) -> dict[str, Any]:
    """``fl_train``'s inner loop over the ordered batches; losses, seconds and examples/s."""
    import torch
    from build_utils import build_optimizer
    from datasets.PFL_DocVQA import collate_fn
    from metrics import Evaluator

    random.seed(0)
    torch.manual_seed(0)
    model = build(args.public, args.dit, args.device, args.dropout)
    data = dataset(args.imdb_dir, args.images_dir, args.split, args.client)
    index = {str(record.get("question_id")): i for i, record in enumerate(data.imdb)}
    order = json.loads(args.order.read_text())
    optimizer = build_optimizer(model, SimpleNamespace(lr=args.lr))
    evaluator = Evaluator(case_sensitive=False)
    model.model.train()
    losses: list[float] = []
    started = None
    timed_examples = 0
    for step, question_ids in enumerate(order):
        if step == args.warmup:
            _synchronize(args.device)
            if args.device.startswith("cuda"):
                torch.cuda.reset_peak_memory_stats()
            started = time.perf_counter()
        batch = collate_fn([data[index[str(qid)]] for qid in question_ids])
        outputs, pred_answers, _ = model.forward(batch, return_pred_answer=True)
        loss = outputs.loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        evaluator.get_metrics(batch["answers"], pred_answers)
        losses.append(float(loss.item()))
        if started is not None:
            timed_examples += len(question_ids)
    _synchronize(args.device)
    seconds = time.perf_counter() - started if started is not None else None
    return {
        "side": "official",
        "loop": "fl_train",
        "losses": losses,
        "timed_steps": len(order) - args.warmup,
        "timed_examples": timed_examples,
        "seconds": seconds,
        "examples_per_second": timed_examples / seconds if seconds else None,
        "peak_memory_bytes": _peak_memory(args.device),
    }


def evaluate(args: argparse.Namespace) -> dict[str, Any]:
    """``eval.py``'s ``evaluate`` loop over the split; answers, ANLS and questions/s."""
    import torch
    from datasets.PFL_DocVQA import collate_fn
    from metrics import Evaluator

    model = build(args.public, args.dit, args.device, dropout=True)
    data = dataset(args.imdb_dir, args.images_dir, args.split, args.client)
    evaluator = Evaluator(case_sensitive=False)
    model.model.eval()
    answers: dict[str, str] = {}
    total_anls = 0.0
    size = args.batch_size
    _synchronize(args.device)
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    for begin in range(0, len(data), size):
        batch = collate_fn([data[i] for i in range(begin, min(begin + size, len(data)))])
        with torch.no_grad():
            _, pred_answers, _ = model.forward(batch, return_pred_answer=True)
        metric = evaluator.get_metrics(batch["answers"], pred_answers)
        total_anls += sum(metric["anls"])
        answers.update(zip(map(str, batch["question_id"]), pred_answers, strict=True))
    _synchronize(args.device)
    seconds = time.perf_counter() - started
    return {
        "side": "official",
        "loop": "eval.py",
        "questions": len(data),
        "anls": total_anls / len(data),
        "seconds": seconds,
        "questions_per_second": len(data) / seconds,
        "peak_memory_bytes": _peak_memory(args.device),
        "answers": answers,
    }


def main(argv: list[str] | None = None) -> None:
    """Run one loop and write its figures as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("loop", choices=("train", "eval"))
    parser.add_argument("--public", type=Path, required=True)
    parser.add_argument("--dit", type=Path, required=True)
    parser.add_argument("--imdb-dir", type=Path, required=True)
    parser.add_argument("--images-dir", type=Path, required=True)
    parser.add_argument("--split", required=True)
    parser.add_argument("--client", type=int, default=None)
    parser.add_argument("--order", type=Path, help="train: JSON list of batches of question ids")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--warmup", type=int, default=1, help="train: untimed first steps")
    parser.add_argument("--batch-size", type=int, default=10)
    parser.add_argument("--dropout", action="store_true")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    _tokenizers_version_as_asked()
    result = train(args) if args.loop == "train" else evaluate(args)
    import transformers

    result["transformers"] = transformers.__version__
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
