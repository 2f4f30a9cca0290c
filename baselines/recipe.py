"""A run's recipe: everything the organisers need to train the same run again.

``pflkit train`` writes ``RUN_DIR/recipe.json`` before the first round; ``pflkit submit``
uploads it as the organiser-only ``recipe`` part, and the evaluator re-runs it in a sandbox
(``evaluator.reproduction``, ``pflkit reproduce``) with ``pflkit train --recipe``. It holds:

- ``config``: the whole training configuration (preset, method, strategy, optimiser, wire
  format, rounds, options) **with its seed**;
- ``base``: the checkpoint every party starts from (``base`` for the shipped one) and the
  SHA-256 of its weights;
- ``data``: the fingerprint of the training files (:func:`benchmark.provenance.training_data_fingerprint`);
- ``kit``: the package version and the digest of its Python sources;
- ``machine``: the CPU pins' label of the machine type, torch's threads and the device;
- ``files``: the source of the modules that define the run's method, strategy, optimiser and
  wire format (relative path -> text): a participant's one-file method travels here, and the
  re-run imports it, and nothing else of the participant's.

**The recipe is a secret of the organisers, like the hidden answers.** With a DP run's seed
anyone could draw its noise again and subtract it from the published model; the evaluator never
shows a recipe, its seed or its files on a page, in an export or in a log.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from baselines.config import TrainConfig

from benchmark.model.loading import resolve_checkpoint
from benchmark.provenance import (
    KIT_ROOT,
    file_digest,
    kit_source_digest,
    kit_version,
    machine_label,
    training_data_fingerprint,
)
from benchmark.recipe import FORMAT, RECIPE_FILE, RecipeError, parse_recipe

__all__ = ["RECIPE_FILE", "build_recipe", "component_files", "read_recipe"]



def component_files(config: Any) -> dict[str, str]:
    """Relative path -> source of the modules defining the run's components."""
    components = [type(config.build_method()), type(config.build_strategy()),
                  type(config.build_optimizer()), type(config.build_codec())]  # fmt: skip
    files: dict[str, str] = {}
    for component in components:
        path = Path(inspect.getsourcefile(component) or "").resolve()
        try:
            relative = path.relative_to(KIT_ROOT)
        except ValueError:
            continue
        files[relative.as_posix()] = path.read_text(encoding="utf-8")
    return dict(sorted(files.items()))


def build_recipe(config: Any, *, data_dir: str | Path, base: str, device: str) -> dict[str, Any]:
    """The recipe of a run about to train ``config`` on ``data_dir`` from ``base``."""
    import torch

    weights = resolve_checkpoint(base) / "model.safetensors"
    return {
        "format": FORMAT,
        "config": config.to_dict(),
        "base": {"name": base, "sha256": file_digest(weights)},
        "data": {"fingerprint": training_data_fingerprint(data_dir)},
        "kit": {"version": kit_version(),
                "source_sha256": kit_source_digest()},  # fmt: skip
        "machine": {"label": machine_label(), "threads": torch.get_num_threads(),
                    "device": device},  # fmt: skip
        "files": component_files(config),
    }


def read_recipe(path: Path) -> tuple[TrainConfig, int]:
    """The configuration and torch threads of a recipe file.

    Raises:
        ValueError: the file is not a recipe this kit reads, or its configuration is not one.
    """
    from baselines.config import TrainConfig

    try:
        recipe = parse_recipe(path.read_bytes())
        return TrainConfig.from_dict(recipe.config), recipe.threads
    except RecipeError:
        raise
    except (TypeError, ValueError) as error:
        raise ValueError(f"recipe: its configuration is not one this kit trains ({error})") from None
