"""Plot a pre-training run's learning curve: held-out ANLS (and, for another family than VT5,
the training loss) against steps.

``python -m benchmark.pretraining.curve RUN_DIR --out curve.png``
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from benchmark.figures import new_figure, save_figure
from benchmark.pretraining.heldout import TARGET_ANLS
from benchmark.pretraining.trainer import CURVE


def read_curve(run_dir: str | Path) -> list[dict]:
    """The entries of `RUN_DIR/learning_curve.jsonl`, in step order."""
    path = Path(run_dir) / CURVE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing; is {run_dir} a `pflkit pretrain` run?")
    entries = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return sorted(entries, key=lambda entry: entry["step"])


def plot_curve(entries: Sequence[dict], out: str | Path) -> Path:
    """Held-out value ANLS (as is and with moved layouts) against steps, with the target line."""
    steps = [entry["step"] for entry in entries]
    figure, axes = new_figure()
    axes.plot(steps, [entry["heldout_value_anls"] for entry in entries], label="held-out values")
    moved = [entry.get("heldout_value_anls_moved_layout") for entry in entries]
    if all(value is not None for value in moved):
        axes.plot(steps, moved, label="same, layouts moved")
    axes.axhline(TARGET_ANLS, linestyle="--", color="grey", label=f"target {TARGET_ANLS}")
    axes.set_xlabel("optimiser step")
    axes.set_ylabel("ANLS (public documents never trained on)")
    axes.set_ylim(0, 1)
    axes.grid(True, alpha=0.3)
    axes.legend(loc="upper left")
    return save_figure(figure, out)


def plot_family_curve(entries: Sequence[dict], out: str | Path, *, title: str = "") -> Path:
    """A family run's curve (:mod:`benchmark.pretraining.family_qa`): held-out val ANLS, the
    same on unseen value answers and the answer prior's ANLS (left axis), and the mean training
    loss (right axis), against steps."""
    steps = [entry["step"] for entry in entries]
    figure, axes = new_figure()
    axes.plot(steps, [entry["val_anls"] for entry in entries], marker=".", label="val ANLS")
    unseen = [entry.get("val_anls_unseen_values") for entry in entries]
    if any(value is not None for value in unseen):
        axes.plot(steps, [float("nan") if v is None else v for v in unseen], marker=".",
                  label="val ANLS, unseen values")  # fmt: skip
    if entries:
        axes.axhline(entries[-1]["answer_prior_anls"], linestyle="--", color="grey",
                     label="answer prior (page not read)")  # fmt: skip
    axes.set_xlabel("optimiser step")
    axes.set_ylabel("ANLS (public val documents)")
    axes.set_ylim(0, 1)
    axes.grid(True, alpha=0.3)
    loss_axes = axes.twinx()
    loss_axes.plot(steps, [entry["loss"] for entry in entries], color="tab:red", alpha=0.6,
                   label="training loss")  # fmt: skip
    loss_axes.set_ylabel("training loss (mean since the last point)")
    loss_axes.set_ylim(bottom=0)
    lines = axes.get_legend_handles_labels()
    loss_lines = loss_axes.get_legend_handles_labels()
    axes.legend(lines[0] + loss_lines[0], lines[1] + loss_lines[1], loc="upper center",
                fontsize="small")  # fmt: skip
    if title:
        axes.set_title(title)
    return save_figure(figure, out)


def plot_any_curve(entries: Sequence[dict], out: str | Path) -> Path:
    """:func:`plot_family_curve` for a family run's points, :func:`plot_curve` for VT5's."""
    if entries and "val_anls" in entries[0]:
        return plot_family_curve(entries, out)
    return plot_curve(entries, out)


def main(argv: Sequence[str] | None = None) -> None:
    """Write the plot of a run's learning curve."""
    parser = argparse.ArgumentParser(prog="python -m benchmark.pretraining.curve",
                                     description=main.__doc__)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--out", type=Path, required=True, help="PNG to write")
    args = parser.parse_args(argv)
    print(f"plot: {plot_any_curve(read_curve(args.run_dir), args.out)}")


if __name__ == "__main__":
    main()
