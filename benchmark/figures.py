"""Result plots written as PNG files: matplotlib's headless set-up and the saving, in one place.

The pre-training learning curve (`benchmark.pretraining.curve`) and the federated experiments'
plots (`experiments.report`, `experiments.tables`) are drawn on a figure from `new_figure` and
written by `save_figure`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

FIGURE_SIZE = (6, 4)
DPI = 120


def new_figure() -> tuple[Any, Any]:
    """A (figure, axes) pair on matplotlib's Agg backend, which needs no display."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=FIGURE_SIZE)


def save_figure(figure: Any, out: str | Path) -> Path:
    """Write the figure as a PNG (creating its folder), release it and return the path."""
    import matplotlib.pyplot as plt

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(out, dpi=DPI)
    plt.close(figure)
    return out
