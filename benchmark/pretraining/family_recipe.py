"""The recipe of a question-answering pre-training of another family's tiny shape.

VT5's recipe (:mod:`benchmark.pretraining.recipe`) is built around VT5: a tokenizer trained on
the corpus, OCR words cropped around the answer, moved boxes. A family that reads no OCR
(Pix2Struct, Idefics3 / SmolVLM) has nothing to crop or move, and it keeps the shipped tokenizer
(its checkpoints must read the kit's token ids), so its recipe is plain supervised fine-tuning on
the public corpus's questions: AdamW, linear warm-up and cosine decay, every input from the
family's own processor. Everything that decides the run is here and is written to the run
directory's ``recipe.json``, so a resumed run follows the settings it started with.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from benchmark.model.families import DEFAULT_FAMILY

#: The file of a run directory that holds its recipe (shared with VT5's runs).
RECIPE_FILE = "recipe.json"
#: Optimiser steps of a family run when ``--steps`` is not given.
DEFAULT_STEPS = 1000


@dataclass(frozen=True)
class FamilyRecipe:
    """Everything that decides a family's pre-training run.

    Attributes:
        family: the model family (:mod:`benchmark.model.families`), never VT5.
        shape: the family's shape to initialise (``tiny``: the kit's CPU shape).
        total_steps: optimiser steps of the schedule (the run ends there).
        batch_size: questions per optimiser step.
        learning_rate: AdamW peak learning rate.
        warmup_steps: linear warm-up before the cosine decay.
        min_learning_rate: learning rate at the end of the cosine decay.
        weight_decay: AdamW weight decay.
        max_grad_norm: gradient clipping norm.
        eval_every: steps between learning-curve points (loss and held-out val ANLS).
        checkpoint_every: steps between resumable checkpoints.
        eval_questions: held-out public val questions scored at each point (a seeded sample).
        seed: seed of the initialisation, of the example order and of the val sample.
    """

    family: str
    shape: str = "tiny"
    total_steps: int = DEFAULT_STEPS
    batch_size: int = 16
    learning_rate: float = 1e-3
    warmup_steps: int = 100
    min_learning_rate: float = 1e-4
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    eval_every: int = 100
    checkpoint_every: int = 100
    eval_questions: int = 200
    seed: int = 0

    def __post_init__(self) -> None:
        if self.family == DEFAULT_FAMILY:
            raise ValueError("VT5 has its own recipe (benchmark.pretraining.recipe); "
                             "FamilyRecipe is for the other families")  # fmt: skip
        for name in ("total_steps", "batch_size", "eval_every", "checkpoint_every",
                     "eval_questions"):  # fmt: skip
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.warmup_steps < 0 or self.learning_rate <= 0:
            raise ValueError("warmup_steps must be >= 0 and learning_rate > 0")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, written to the run directory."""
        return asdict(self)


def family_recipe(family: str, *, steps: int | None = None, **overrides: Any) -> FamilyRecipe:
    """The recipe of a family's run, with ``steps`` optimiser steps (default
    :data:`DEFAULT_STEPS`) and any other field overridden."""
    recipe = FamilyRecipe(family=family, **overrides)
    return recipe if steps is None else replace(recipe, total_steps=steps)


def _read_recipe(run_dir: Path) -> dict[str, Any] | None:
    """The JSON object of a run directory's ``recipe.json`` (``None``: there is none).

    Raises:
        ValueError: when it cannot be read as a JSON object.
    """
    path = Path(run_dir) / RECIPE_FILE
    if not path.is_file():
        return None
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: not a readable recipe ({error})") from error
    if not isinstance(found, dict):
        raise ValueError(f"{path}: not a recipe (a JSON object)")
    return found


def run_family(run_dir: Path) -> str | None:
    """The family an existing run directory was started for (``None``: a new directory).

    VT5's runs predate families: their recipe names none and they are VT5's.

    Raises:
        ValueError: when ``recipe.json`` cannot be read as a recipe.
    """
    found = _read_recipe(run_dir)
    return None if found is None else str(found.get("family", DEFAULT_FAMILY))


def resumed_recipe(run_dir: Path, family: str, *, steps: int | None = None) -> FamilyRecipe:
    """The recipe of a family's run: the one its directory started with, so that a run is
    resumed without repeating its options, or a new one (``steps`` given, or a new directory).

    Raises:
        ValueError: when the directory's recipe is not a readable recipe of that family.
    """
    found = _read_recipe(run_dir)
    if steps is not None or found is None:
        return family_recipe(family, steps=steps)
    try:
        recipe = FamilyRecipe(**found)
    except TypeError as error:
        raise ValueError(f"{Path(run_dir) / RECIPE_FILE}: not a {family} recipe ({error})") from error
    if recipe.family != family:
        raise ValueError(f"{run_dir}: a {recipe.family} run, not a {family} one")
    return recipe
