"""The resumable pre-training loop of the tiny VT5 base model.

The run directory holds:

- `recipe.json`: the recipe the run follows;
- `tokenizer/spiece.model`: the SentencePiece model trained on the public corpus;
- `checkpoints/step-NNNNNN/`: model + processor (safetensors) and `trainer_state.pt` (this
  run's own optimiser state, written and read only by this loop);
- `learning_curve.jsonl`: loss and held-out ANLS against steps.

Every checkpoint is written atomically, so a run killed at any moment resumes from its last
complete checkpoint. The example stream is a function of (seed, step), so a resumed run sees
the same examples as an uninterrupted one.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import time
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from benchmark.pretraining.examples import make_example
from benchmark.pretraining.heldout import (
    TARGET_ANLS,
    unseen_value_questions,
    with_moved_layouts,
)
from benchmark.pretraining.recipe import PretrainingRecipe

CHECKPOINTS = "checkpoints"
CURVE = "learning_curve.jsonl"
STATE_FILE = "trainer_state.pt"
KEEP_CHECKPOINTS = 2


def learning_rate_at(step: int, recipe: PretrainingRecipe) -> float:
    """Linear warm-up, then cosine decay to `min_learning_rate` at the last step."""
    if step < recipe.warmup_steps:
        return recipe.learning_rate * (step + 1) / recipe.warmup_steps
    progress = (step - recipe.warmup_steps) / max(1, recipe.total_steps - recipe.warmup_steps)
    cosine = 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
    return recipe.min_learning_rate + (recipe.learning_rate - recipe.min_learning_rate) * cosine


class PixelCache:
    """Page images as normalised tensors, decoded once per page (kept in float16)."""

    def __init__(self, processor: Any) -> None:
        self.processor = processor
        self._pixels: dict[str, torch.Tensor] = {}

    def __call__(self, paths: list[str]) -> torch.Tensor:
        """(len(paths), 3, H, W) float32 pixels."""
        for path in paths:
            if path not in self._pixels:
                self._pixels[path] = self.processor.load_image(path).to(torch.float16)
        return torch.stack([self._pixels[path] for path in paths]).float()


def _batch(records: list[dict], step: int, recipe: PretrainingRecipe, processor: Any,
           pixels: PixelCache, use_visual: bool) -> dict[str, torch.Tensor]:
    """The training batch of one step (a function of the seed and the step only)."""
    rng = random.Random(recipe.seed * 1_000_003 + step)
    stage = recipe.stage_at(step)
    examples = [
        make_example(records[rng.randrange(len(records))], stage.window_words,
                     stage.reading_share, rng, stage.transcription_share, recipe.moved_share)
        for _ in range(recipe.batch_size)
    ]
    encoded = processor.encode_batch(
        [e.question for e in examples], [e.words for e in examples], [e.boxes for e in examples]
    )
    features = [
        {"input_ids": ids, "input_boxes": boxes}
        for ids, boxes in zip(encoded["input_ids"], encoded["input_boxes"], strict=True)
    ]
    batch = processor.collate(features, with_images=False)
    # the recipe caps its labels at the model's answer bound (pre-training's own choice)
    batch["labels"] = processor.labels_tensor([e.answer for e in examples],
                                              max_tokens=processor.max_answer_tokens)
    if use_visual:
        batch["pixel_values"] = pixels([e.image_path for e in examples])
    return batch


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The newest complete checkpoint of a run, if any."""
    directory = run_dir / CHECKPOINTS
    if not directory.is_dir():
        return None
    complete = sorted(p for p in directory.glob("step-*") if (p / STATE_FILE).is_file())
    return complete[-1] if complete else None


def save_run_checkpoint(run_dir: Path, step: int, model: Any, processor: Any, optimizer: Any,
                        **state: Any) -> Path:
    """Write a complete checkpoint atomically and drop all but the newest few.

    The optimiser state (and any extra ``state``, e.g. another loop's clock) is written last, by
    a rename, so a directory holding it is complete: :func:`latest_checkpoint` ignores the rest.
    """
    from benchmark.model.loading import save_checkpoint

    target = run_dir / CHECKPOINTS / f"step-{step:06d}"
    save_checkpoint(model, processor, target)
    state_tmp = target / (STATE_FILE + ".tmp")
    torch.save({"step": step, "optimizer": optimizer.state_dict(), **state}, state_tmp)
    os.replace(state_tmp, target / STATE_FILE)
    for old in sorted((run_dir / CHECKPOINTS).glob("step-*"))[:-KEEP_CHECKPOINTS]:
        shutil.rmtree(old, ignore_errors=True)
    return target


def append_curve(run_dir: Path, entry: dict) -> None:
    """Add one point to the run's learning curve (one JSON object a line)."""
    with open(run_dir / CURVE, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")


def pretrain(model: Any, processor: Any, training: Any, validation: Any, run_dir: Path,
             recipe: PretrainingRecipe, *, max_steps: int | None = None,
             progress: bool = True) -> dict:
    """Train `model` on the public corpus from its current step to the end of the recipe.

    Args:
        model: a `VT5ForConditionalGeneration` (fresh or loaded from the latest checkpoint).
        processor: its processor.
        training: `load_split` dataset of the public training documents.
        validation: `load_split` dataset of held-out public documents.
        run_dir: the run directory (checkpoints, curve).
        recipe: the recipe.
        max_steps: stop after this many steps in total (default: the recipe's total).
        progress: show a progress bar.

    Returns:
        The last held-out evaluation (`step`, `anls`, `accuracy`, per question type).
    """
    from benchmark.evaluation import evaluate

    run_dir = Path(run_dir)
    stop = min(max_steps or recipe.total_steps, recipe.total_steps)
    optimizer = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad],
        lr=recipe.learning_rate,
        weight_decay=recipe.weight_decay,
    )
    start = 0
    checkpoint = latest_checkpoint(run_dir)
    if checkpoint is not None:
        state = torch.load(checkpoint / STATE_FILE, weights_only=True)
        optimizer.load_state_dict(state["optimizer"])
        start = int(state["step"])
    records = training.select_columns(
        ["question", "answers", "ocr_tokens", "ocr_boxes", "image_path"]
    ).to_list()
    heldout = unseen_value_questions(validation, training, limit=recipe.eval_questions,
                                     seed=recipe.seed)
    heldout_moved = with_moved_layouts(heldout, seed=recipe.seed)
    pixels = PixelCache(processor)
    use_visual = bool(model.config.use_visual)
    last_eval: dict = {}
    clock = time.perf_counter()
    model.train()
    bar = tqdm(total=stop, initial=start, desc="Pre-training", unit="step", disable=not progress)
    for step in range(start, stop):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate_at(step, recipe)
        batch = _batch(records, step, recipe, processor, pixels, use_visual)
        loss = model(**batch).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.max_grad_norm)
        optimizer.step()
        bar.update(1)
        bar.set_postfix(loss=f"{loss.item():.3f}", lr=f"{optimizer.param_groups[0]['lr']:.1e}")
        done = step + 1
        if done % recipe.eval_every == 0 or done == stop:
            result = evaluate(model, processor, heldout, progress=False)
            moved = evaluate(model, processor, heldout_moved, progress=False)
            model.train()
            last_eval = {
                "step": done,
                "loss": round(loss.item(), 4),
                "heldout_value_anls": round(result.anls, 4),
                "heldout_value_accuracy": round(result.accuracy, 4),
                "heldout_value_anls_moved_layout": round(moved.anls, 4),
                "n": result.n,
                "window_words": recipe.stage_at(step).window_words,
                "seconds": round(time.perf_counter() - clock, 1),
                "by_question_type": {k: round(v.anls, 4)
                                     for k, v in result.by_question_type.items()},
            }
            append_curve(run_dir, last_eval)
            bar.write(f"step {done}: held-out value ANLS {result.anls:.3f} "
                      f"(target {TARGET_ANLS}), moved layouts {moved.anls:.3f}, "
                      f"loss {loss.item():.3f}")
        if done % recipe.checkpoint_every == 0 or done == stop:
            save_run_checkpoint(run_dir, done, model, processor, optimizer)
    bar.close()
    return last_eval
