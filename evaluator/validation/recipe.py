"""The optional ``recipe`` part: readable by the re-run's one strict reader, and naming the run
the metadata describes. Its content is the organisers' alone (``evaluator.reproduction``)."""

from __future__ import annotations

from pathlib import Path

from benchmark.recipe import RecipeError, parse_recipe
from evaluator.validation.errors import InvalidSubmission


def check_recipe(path: Path, method: str) -> None:
    """Refuse a recipe the re-run could not read, or one of another preset than the metadata's.

    Args:
        path: the stored ``recipe.json`` (nothing is checked when it was not sent).
        method: the metadata's method (``pflkit train`` writes its preset there).

    Raises:
        InvalidSubmission: naming the part and what is wrong, never the recipe's values
            beyond its preset.
    """
    if not path.is_file():
        return
    try:
        recipe = parse_recipe(path.read_bytes())
    except RecipeError as error:
        raise InvalidSubmission("recipe", f"{error}; upload the recipe.json pflkit train wrote") from None
    if recipe.preset != method:
        raise InvalidSubmission(
            "recipe", f"recipe.json trains the preset {recipe.preset!r} but submission.json "
            f"names the method {method!r}; upload the recipe of this run",
        )  # fmt: skip
