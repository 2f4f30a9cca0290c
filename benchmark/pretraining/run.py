"""Starting or resuming a pre-training run: tokenizer, model and data of a run directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmark.pretraining.recipe import PretrainingRecipe
from benchmark.pretraining.trainer import latest_checkpoint

RECIPE_FILE = "recipe.json"
TOKENIZER_DIR = "tokenizer"


def corpus_texts(training: Any) -> list[str]:
    """Sentences the tokenizer learns from: each page's OCR text, questions and answers."""
    texts = [" ".join(words) for words in training["ocr_tokens"]]
    texts += list(training["question"])
    texts += [answer for answers in training["answers"] for answer in answers]
    return texts


def check_recipe(run_dir: Path, recipe: Any) -> None:
    """Refuse to resume a run under a different recipe; write the recipe of a new run.

    Args:
        run_dir: the run directory.
        recipe: a :class:`PretrainingRecipe` or any recipe with ``to_dict()`` (another family's).
    """
    path = run_dir / RECIPE_FILE
    wanted = json.loads(json.dumps(recipe.to_dict()))
    if path.is_file():
        found = json.loads(path.read_text(encoding="utf-8"))
        if found != wanted:
            raise ValueError(
                f"{path}: this run directory was started with another recipe; resume it with "
                "the same settings or pass a new --out directory"
            )
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(wanted, indent=2), encoding="utf-8")
    tmp.replace(path)


def new_model_and_processor(training: Any, run_dir: Path, recipe: PretrainingRecipe):
    """Train the tokenizer on the public corpus and build a randomly initialised tiny VT5."""
    from benchmark.model.random_init import random_tiny_model

    return random_tiny_model(
        corpus_texts(training),
        run_dir / TOKENIZER_DIR,
        vocab_size=recipe.vocab_size,
        seed=recipe.seed,
        language_config=dict(recipe.language_config),
        visual_config=dict(recipe.visual_config),
        spatial_embedding_dim=recipe.spatial_embedding_dim,
        max_answer_tokens=recipe.max_answer_tokens,
        hidden_dropout_prob=0.0,
    )


def open_run(public_dir: Path, run_dir: Path, recipe: PretrainingRecipe):
    """Model, processor and data of a run: resumed from its last checkpoint, or new.

    Args:
        public_dir: the public corpus (`DIR/public` of a generated benchmark).
        run_dir: the run directory.
        recipe: the recipe (must equal the one a resumed run started with).

    Returns:
        (model, processor, training dataset, validation dataset).
    """
    from benchmark.data import load_split
    from benchmark.model import load_model, load_processor

    training = load_split(public_dir, "train")
    validation = load_split(public_dir, "val")
    check_recipe(run_dir, recipe)
    checkpoint = latest_checkpoint(run_dir)
    if checkpoint is not None:
        model = load_model(checkpoint)
        processor = load_processor(checkpoint)
    else:
        model, processor = new_model_and_processor(training, run_dir, recipe)
    return model, processor, training, validation
