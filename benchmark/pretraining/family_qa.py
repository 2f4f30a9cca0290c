"""Question-answering pre-training of another family's tiny shape on the public corpus.

A family other than VT5 starts from its random weights (its ``random_model`` with the shipped
tokenizer) and learns the public corpus's questions as they are, every batch made by the
family's own processor (``collate(rows, with_labels=True, with_images=True)``), so what is
trained is exactly what the kit's training, scoring and audit feed that family. Only
``DIR/public`` is read, never the PFL clients' data.

The run directory is laid out as VT5's (:mod:`benchmark.pretraining.trainer`), and written the
same way: ``recipe.json``; ``checkpoints/step-NNNNNN/`` (a kit checkpoint, loadable by
``pflkit evaluate`` and ``pflkit train --base``, with ``trainer_state.pt`` written last, by a
rename: the optimiser, the step, the clock and torch's random state, so a killed run resumes
from its last complete checkpoint exactly where it was); ``learning_curve.jsonl``: one point
every ``eval_every`` steps (:func:`curve_point`). The example order is a function of the seed
and the step (a fresh permutation of the corpus each epoch), so a resumed run sees the examples
an uninterrupted one would.
"""

from __future__ import annotations

import functools
import random
import time
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from benchmark.pretraining.family_heldout import (
    answer_prior_anls,
    mean_anls_of,
    unseen_value_ids,
    val_sample,
)
from benchmark.pretraining.family_recipe import FamilyRecipe
from benchmark.pretraining.run import check_recipe
from benchmark.pretraining.trainer import (
    STATE_FILE,
    append_curve,
    latest_checkpoint,
    learning_rate_at,
    save_run_checkpoint,
)

#: The columns of a public record the family's processor reads with labels.
ROW_COLUMNS = ("question", "answers", "image_path")


@functools.lru_cache(maxsize=4)
def epoch_order(size: int, seed: int, epoch: int) -> tuple[int, ...]:
    """The order of the corpus's ``size`` questions in one epoch (seeded by seed and epoch)."""
    order = list(range(size))
    random.Random(seed * 1_000_003 + epoch).shuffle(order)
    return tuple(order)


def batch_rows(records: list[dict], step: int, recipe: FamilyRecipe) -> list[dict]:
    """The rows of a (0-based) step's batch: the next ``batch_size`` questions of the epochs'
    permutations, so every question is seen once an epoch whatever step a run resumed at."""
    size = len(records)
    if size == 0:
        raise ValueError("the public training split is empty: nothing to pre-train on")
    first = step * recipe.batch_size
    rows = []
    for position in range(first, first + recipe.batch_size):
        epoch, index = divmod(position, size)
        rows.append(records[epoch_order(size, recipe.seed, epoch)[index]])
    return rows


def open_family_run(public_dir: Path, run_dir: Path, recipe: FamilyRecipe) -> tuple[Any, ...]:
    """Model, processor and data of a family's run: resumed from its last checkpoint, or the
    family's random ``recipe.shape`` with the shipped tokenizer (seeded by ``recipe.seed``).

    Args:
        public_dir: the public corpus (``DIR/public`` of a generated benchmark).
        run_dir: the run directory.
        recipe: the recipe (must equal the one a resumed run started with).

    Returns:
        ``(model, processor, training dataset, validation dataset)``.

    Raises:
        ValueError: when ``run_dir`` was started under another recipe.
    """
    from benchmark.data import load_split
    from benchmark.model import load_model, load_processor
    from benchmark.model.families import family_named
    from benchmark.shipped import BASE_MODEL_DIR

    training = load_split(public_dir, "train")
    validation = load_split(public_dir, "val")
    check_recipe(run_dir, recipe)
    checkpoint = latest_checkpoint(run_dir)
    if checkpoint is not None:
        return load_model(checkpoint), load_processor(checkpoint), training, validation
    torch.manual_seed(recipe.seed)
    model, processor = family_named(recipe.family).random_model(recipe.shape, BASE_MODEL_DIR)
    return model, processor, training, validation


def curve_point(step: int, losses: list[float], result: Any, unseen: set[int], prior: float,
                recipe: FamilyRecipe, examples: int, seconds: float) -> dict[str, Any]:
    """One learning-curve point: the mean training loss since the last point, the held-out
    val ANLS (all sampled questions, and those with an unseen value answer), the answer
    prior's ANLS on the same questions (:mod:`.family_heldout`), the epochs done and the
    cumulative seconds (training and evaluation, across resumptions)."""
    unseen_anls = mean_anls_of(result, unseen)
    return {
        "step": step,
        "loss": round(sum(losses) / len(losses), 4) if losses else None,
        "learning_rate": learning_rate_at(step - 1, recipe),
        "val_anls": round(result.anls, 4),
        "val_accuracy": round(result.accuracy, 4),
        "val_anls_unseen_values": None if unseen_anls is None else round(unseen_anls, 4),
        "n": result.n,
        "n_unseen_values": len(unseen),
        "answer_prior_anls": round(prior, 4),
        "epochs": round(step * recipe.batch_size / examples, 3),
        "seconds": round(seconds, 1),
        "by_question_type": {kind: round(score.anls, 4)
                             for kind, score in sorted(result.by_question_type.items())},
    }  # fmt: skip


def pretrain_family(model: Any, processor: Any, training: Any, validation: Any, run_dir: Path,
                    recipe: FamilyRecipe, *, max_steps: int | None = None,
                    progress: bool = True) -> dict[str, Any]:
    """Train a family's model on the public corpus from its current step to the recipe's end.

    Args:
        model: the family's model (fresh, or loaded from the run's latest checkpoint).
        processor: its processor.
        training: ``load_split`` dataset of the public training documents.
        validation: ``load_split`` dataset of the held-out public documents.
        run_dir: the run directory (checkpoints, curve).
        recipe: the recipe.
        max_steps: stop after this many steps in total (the schedule stays the recipe's).
        progress: show a progress bar.

    Returns:
        The last learning-curve point (:func:`curve_point`; empty when nothing was left to do).

    Raises:
        FloatingPointError: when the loss is not finite (naming the step).
    """
    from benchmark.evaluation import evaluate

    run_dir = Path(run_dir)
    stop = min(max_steps or recipe.total_steps, recipe.total_steps)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad],
                                  lr=recipe.learning_rate, weight_decay=recipe.weight_decay)
    start, seconds_before = 0, 0.0
    checkpoint = latest_checkpoint(run_dir)
    if checkpoint is not None:
        state = torch.load(checkpoint / STATE_FILE, weights_only=True)
        optimizer.load_state_dict(state["optimizer"])
        start, seconds_before = int(state["step"]), float(state.get("seconds", 0.0))
        if "rng" in state:
            torch.set_rng_state(state["rng"])
    records = training.select_columns(list(ROW_COLUMNS)).to_list()
    questions = val_sample(validation, limit=recipe.eval_questions, seed=recipe.seed)
    unseen = unseen_value_ids(questions, training)
    prior = answer_prior_anls(questions, training)
    point: dict[str, Any] = {}
    losses: list[float] = []
    clock = time.perf_counter()
    model.train()
    bar = tqdm(total=stop, initial=start, desc=f"Pre-training {recipe.family}", unit="step",
               disable=not progress)  # fmt: skip
    for step in range(start, stop):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate_at(step, recipe)
        batch = processor.collate(batch_rows(records, step, recipe), with_labels=True,
                                  with_images=True)  # fmt: skip
        loss = model(**batch).loss
        if not torch.isfinite(loss):
            raise FloatingPointError(f"step {step + 1}: the loss is {loss.item()}; start a new "
                                     "run with a lower learning rate")  # fmt: skip
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.max_grad_norm)
        optimizer.step()
        losses.append(loss.item())
        bar.update(1)
        bar.set_postfix(loss=f"{loss.item():.3f}", lr=f"{optimizer.param_groups[0]['lr']:.1e}")
        done = step + 1
        seconds = seconds_before + time.perf_counter() - clock
        if done % recipe.eval_every == 0 or done == stop:
            result = evaluate(model, processor, questions, progress=False)
            model.train()
            seconds = seconds_before + time.perf_counter() - clock
            point = curve_point(done, losses, result, unseen, prior, recipe, len(records),
                                seconds)  # fmt: skip
            append_curve(run_dir, point)
            losses.clear()
            bar.write(f"step {done}: loss {point['loss']}, val ANLS {result.anls:.3f} "
                      f"(unseen values {point['val_anls_unseen_values']}, answer prior "
                      f"{prior:.3f})")  # fmt: skip
        if done % recipe.checkpoint_every == 0 or done == stop:
            save_run_checkpoint(run_dir, done, model, processor, optimizer, seconds=seconds,
                                rng=torch.get_rng_state())  # fmt: skip
    bar.close()
    return point
