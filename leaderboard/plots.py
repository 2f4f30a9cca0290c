"""Server-side plots of the tracks (matplotlib, Agg backend, PNG bytes).

Track 1: test ANLS against total bytes on a log axis, with the threshold line; ranked
submissions filled, the ones below the threshold hollow. Track 2: test ANLS against the claimed
epsilon of verified claims, with the budgets as vertical guides. Track 3: per client, the
personalised ANLS (filled) against the global model's (hollow) for the top submissions.
:data:`PLOTS` maps a track's plot name (``Track.plot``) to the function that draws it.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence

from benchmark.tracks import COMMUNICATION, PERSONALISATION, PRIVACY
from leaderboard.ranking import BUDGETS, Row, TrackResult

_SIZE = (7.0, 3.6)
#: submissions of the track-3 plot: the top of the ranking.
TOP_PERSONAL = 3
_COLOURS = ("tab:blue", "tab:orange", "tab:green")


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
    axes.set_title(f"Track {COMMUNICATION.number}: utility against communication")
    axes.grid(True, which="major", alpha=0.3)
    axes.legend(loc="lower right", fontsize=8)
    return _png(figure)


def track2_png(
    rows: Sequence[Row], *, budgets: Sequence[float] = BUDGETS, delta: float = PRIVACY.delta
) -> bytes:
    """ANLS against claimed epsilon for verified claims, budgets as vertical lines.

    Args:
        rows: verified track-2 submissions with an epsilon.
        budgets: the epsilon budgets.
        delta: the largest delta of a claim (named on the axis).

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
    mantissa, exponent = f"{delta:e}".split("e")
    axes.set_xlabel(f"epsilon (delta = {float(mantissa):g}e{int(exponent)}, per provider)")
    axes.set_ylabel("test ANLS")
    axes.set_title(f"Track {PRIVACY.number}: utility against privacy budget")
    axes.grid(True, alpha=0.3)
    return _png(figure)


def track3_png(rows: Sequence[Row]) -> bytes:
    """Per client: personalised ANLS (filled) and the global model's (hollow), joined.

    Args:
        rows: the top track-3 submissions, best first (at most :data:`TOP_PERSONAL` are drawn),
            with their per-client figures.

    Returns:
        The PNG image.
    """
    figure, axes = _figure()
    clients: set[int] = set()
    for index, row in enumerate(list(rows)[:TOP_PERSONAL]):
        scored = [c for c in row.personal_clients or () if c.get("n")]
        if not scored:
            continue
        colour = _COLOURS[index % len(_COLOURS)]
        xs = [int(c["client"]) + (index - 1) * 0.12 for c in scored]
        clients.update(int(c["client"]) for c in scored)
        # Plain text: a team name such as "$\\frac{a}$" must not be parsed as mathtext.
        label = f"{index + 1}. {row.team}".replace("$", "\\$")
        personal = [c["personal_anls"] for c in scored]
        shared = [c["global_anls"] for c in scored]
        # clients are categories: no line joins them; a segment joins a client's two figures.
        axes.vlines(xs, shared, personal, color=colour, linewidth=1, alpha=0.6)
        axes.scatter(xs, personal, s=24, color=colour, label=f"{label}: personalised")
        axes.scatter(xs, shared, s=24, facecolors="none", edgecolors=colour,
                     label=f"{label}: global")  # fmt: skip
    if clients:
        axes.set_xticks(sorted(clients))
        axes.legend(loc="lower right", fontsize=7, ncols=2)
    axes.set_ylim(0, 1)
    axes.set_xlabel("client (its own test questions)")
    axes.set_ylabel("test ANLS")
    axes.set_title(f"Track {PERSONALISATION.number}: personalised against global model, per client")
    axes.grid(True, alpha=0.3)
    return _png(figure)


def _bytes_plot(result: TrackResult) -> bytes:
    """A communication track: its ranked rows and those below the threshold."""
    (table,) = result.tables.values()
    below = [u.row for u in result.unranked if u.reason.startswith("ANLS ")]
    return track1_png([e.row for e in table.ranked], below, threshold=result.threshold)


def _epsilon_plot(result: TrackResult) -> bytes:
    """A privacy track: every verified claim ranked in some budget, once."""
    verified = {e.row.id: e.row for t in result.tables.values() for e in t.ranked}
    return track2_png(list(verified.values()), budgets=result.track.budgets,
                      delta=result.track.delta)  # fmt: skip


def _personal_plot(result: TrackResult) -> bytes:
    """A personalisation track: the top ranked submissions, per client."""
    (table,) = result.tables.values()
    return track3_png([e.row for e in table.ranked[:TOP_PERSONAL]])


#: ``Track.plot`` -> the function that draws that plot of a track's rankings.
PLOTS: dict[str, Callable[[TrackResult], bytes]] = {
    "bytes": _bytes_plot,
    "epsilon": _epsilon_plot,
    "personal": _personal_plot,
}


def track_png(result: TrackResult) -> bytes:
    """The plot of one track's rankings (:data:`PLOTS`).

    Raises:
        LookupError: the track has no plot, or none registered under its name.
    """
    if result.track.plot not in PLOTS:
        raise LookupError(f"track {result.track.number} has no plot ({result.track.plot!r})")
    return PLOTS[result.track.plot](result)
