"""Server-side plots of both tracks (matplotlib, Agg backend, PNG bytes).

Track 1: test ANLS against total bytes on a log axis, with the threshold line; ranked
submissions filled, the ones below the threshold hollow. Track 2: test ANLS against the claimed
epsilon of verified claims, with the budgets as vertical guides.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

from leaderboard.ranking import BUDGETS, Row

_SIZE = (7.0, 3.6)


def _figure():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    figure = Figure(figsize=_SIZE, dpi=100, layout="constrained")
    return figure, figure.add_subplot()


def _png(figure) -> bytes:  # type: ignore[no-untyped-def]
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def track1_png(ranked: Sequence[Row], below: Sequence[Row], *, threshold: float) -> bytes:
    """ANLS against total bytes (log scale) with the threshold line.

    Args:
        ranked: submissions that reach the threshold.
        below: scored submissions below the threshold.
        threshold: the track-1 ANLS threshold.

    Returns:
        The PNG image.
    """
    figure, axes = _figure()
    for rows, style, label in (
        (ranked, {"color": "tab:blue"}, "ranked"),
        (below, {"facecolors": "none", "edgecolors": "tab:gray"}, "below threshold"),
    ):
        points = [(r.total_bytes, r.anls) for r in rows if r.total_bytes and r.anls is not None]
        if points:
            xs, ys = zip(*points, strict=True)
            axes.scatter(xs, ys, s=22, label=label, **style)
    for row in list(ranked)[:10]:
        if row.total_bytes and row.anls is not None:
            # Plain text: a name such as "$\\frac{a}$" must not be parsed as mathtext.
            axes.annotate(row.team, (row.total_bytes, row.anls), textcoords="offset points",
                          xytext=(4, 4), fontsize=7, color="tab:blue", parse_math=False)  # fmt: skip
    axes.axhline(
        threshold, color="tab:red", linestyle="--", linewidth=1, label=f"threshold {threshold:.4f}"
    )
    axes.set_xscale("log")
    axes.set_xlabel("total bytes exchanged (log scale)")
    axes.set_ylabel("test ANLS")
    axes.set_title("Track 1: utility against communication")
    axes.grid(True, which="major", alpha=0.3)
    axes.legend(loc="lower right", fontsize=8)
    return _png(figure)


def track2_png(rows: Sequence[Row], *, budgets: Sequence[float] = BUDGETS) -> bytes:
    """ANLS against claimed epsilon for verified claims, budgets as vertical lines.

    Args:
        rows: verified track-2 submissions with an epsilon.
        budgets: the epsilon budgets.

    Returns:
        The PNG image.
    """
    figure, axes = _figure()
    points = [(r.epsilon, r.anls) for r in rows if r.epsilon is not None and r.anls is not None]
    if points:
        xs, ys = zip(*points, strict=True)
        axes.scatter(xs, ys, s=22, color="tab:green", label="verified claims")
        axes.legend(loc="lower right", fontsize=8)
    for budget in budgets:
        axes.axvline(budget, color="tab:gray", linestyle=":", linewidth=1)
    axes.set_xlim(0, max(budgets) * 1.1)
    axes.set_xticks(list(budgets))
    axes.set_xlabel("epsilon (delta = 1e-5, per provider)")
    axes.set_ylabel("test ANLS")
    axes.set_title("Track 2: utility against privacy budget")
    axes.grid(True, alpha=0.3)
    return _png(figure)
