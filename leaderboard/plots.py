"""Server-side plots of the tracks (matplotlib, Agg backend), drawn through
:class:`~leaderboard.plot_canvas.PlotCanvas` so that each records where every submission landed.

Track 1: test ANLS against total bytes on a log axis, with the threshold line; ranked
submissions filled, the ones below the threshold hollow. Track 2: test ANLS against the claimed
epsilon of verified claims, with the budgets as vertical guides. Track 3: per client, the global
model's ANLS (hollow) joined to the personalised ANLS (filled) of each top submission, side by
side so that neither hides the other. Every plot's limits hold every point and line drawn, and
its legend sits under the axes. :data:`PLOTS` maps a track's plot name (``Track.plot``) to the
function that draws it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from benchmark.tracks import COMMUNICATION, PERSONALISATION, PRIVACY
from leaderboard.plot_canvas import DrawnPlot, PlotCanvas, Point
from leaderboard.ranking import BUDGETS, Row, TrackResult

#: submissions of the track-3 plot: the top of the ranking.
TOP_PERSONAL = 3
#: ranked submissions of the track-1 plot named beside their point.
NAMED = 10
_COLOURS = ("tab:blue", "tab:orange", "tab:green")
#: the width of a client's group on the track-3 plot, in clients (one slot per submission).
_GROUP = 0.8
#: the longest team name a legend shows in full.
_LEGEND_NAME = 24


def _bytes_points(rows: Sequence[Row]) -> list[Point]:
    return [Point(r.id, r.team, float(r.total_bytes), r.anls)
            for r in rows if r.total_bytes and r.anls is not None]  # fmt: skip


def track1_plot(ranked: Sequence[Row], below: Sequence[Row], *, threshold: float) -> DrawnPlot:
    """ANLS against total bytes (log scale) with the threshold line.

    Args:
        ranked: submissions that reach the threshold.
        below: scored submissions below the threshold.
        threshold: the track-1 ANLS threshold.

    Returns:
        The plot and what it drew.
    """
    canvas = PlotCanvas(title=f"Track {COMMUNICATION.number}: utility against communication",
                        xlabel="total bytes exchanged (log scale)", ylabel="test ANLS",
                        xscale="log")  # fmt: skip
    shown = _bytes_points(ranked)
    canvas.points("ranked", shown, colour="tab:blue")
    canvas.points("below threshold", _bytes_points(below), colour="tab:gray", filled=False)
    canvas.names(shown[:NAMED], colour="tab:blue")
    canvas.line(f"threshold {threshold:.4f}", "y", threshold, color="tab:red", linestyle="--",
                linewidth=1)  # fmt: skip
    return canvas.finish()


def track2_plot(
    rows: Sequence[Row], *, budgets: Sequence[float] = BUDGETS, delta: float = PRIVACY.delta
) -> DrawnPlot:
    """ANLS against claimed epsilon for verified claims, budgets as vertical lines.

    Args:
        rows: verified track-2 submissions with an epsilon.
        budgets: the epsilon budgets.
        delta: the largest delta of a claim (named on the axis).

    Returns:
        The plot and what it drew.
    """
    mantissa, exponent = f"{delta:e}".split("e")
    canvas = PlotCanvas(
        title=f"Track {PRIVACY.number}: utility against privacy budget", ylabel="test ANLS",
        xlabel=f"epsilon (delta = {float(mantissa):g}e{int(exponent)}, per provider)",
    )  # fmt: skip
    points = [Point(r.id, r.team, r.epsilon, r.anls)
              for r in rows if r.epsilon is not None and r.anls is not None]  # fmt: skip
    canvas.points("verified claims", points, colour="tab:green")
    for budget in budgets:
        canvas.line("", "x", budget, color="tab:gray", linestyle=":", linewidth=1)
    canvas.axes.set_xticks(list(budgets))
    return canvas.finish(extra_x=[0.0])


def _legend_name(team: str) -> str:
    """A team's name for a legend: shortened, and plain text (``$`` is not mathtext)."""
    if len(team) > _LEGEND_NAME:
        team = team[: _LEGEND_NAME - 1] + "\N{HORIZONTAL ELLIPSIS}"
    return team.replace("$", "\\$")


def _personal_pairs(row: Row, offset: float) -> list[tuple[Point, Point]]:
    """One submission's (global, personalised) points per scored client, the global one left."""
    quarter = _GROUP / TOP_PERSONAL / 4
    return [(Point(row.id, row.team, int(c["client"]) + offset - quarter, c["global_anls"]),
             Point(row.id, row.team, int(c["client"]) + offset + quarter, c["personal_anls"]))
            for c in row.personal_clients or () if c.get("n")]  # fmt: skip


def track3_plot(rows: Sequence[Row]) -> DrawnPlot:
    """Per client: the global model's ANLS (hollow) joined to the personalised ANLS (filled).

    Each of the top submissions has its own slot in a client's group, so that no marker hides
    another (a personalisation that changed nothing shows both markers at one height).

    Args:
        rows: the top track-3 submissions, best first (at most :data:`TOP_PERSONAL` are drawn),
            with their per-client figures.

    Returns:
        The plot and what it drew.
    """
    canvas = PlotCanvas(
        title=f"Track {PERSONALISATION.number}: personalised against global model, per client",
        xlabel="client (its own test questions)", ylabel="test ANLS",
    )  # fmt: skip
    top = list(rows)[:TOP_PERSONAL]
    clients: set[int] = set()
    for index, row in enumerate(top):
        offset = (index - (len(top) - 1) / 2) * _GROUP / TOP_PERSONAL
        pairs = _personal_pairs(row, offset)
        if not pairs:
            continue
        colour = _COLOURS[index % len(_COLOURS)]
        label = f"{index + 1}. {_legend_name(row.team)}"
        canvas.joins(pairs, colour=colour)
        canvas.points(f"{label}: personalised", [p for _, p in pairs], colour=colour)
        canvas.points(f"{label}: global", [g for g, _ in pairs], colour=colour, filled=False)
        clients.update(int(c["client"]) for c in row.personal_clients if c.get("n"))
    canvas.axes.set_xticks(sorted(clients))
    return canvas.finish(legend_columns=len(top) or 1)


def _bytes_plot(result: TrackResult) -> DrawnPlot:
    """A communication track: its ranked rows and those below the threshold."""
    (table,) = result.tables.values()
    below = [u.row for u in result.unranked if u.reason.startswith("ANLS ")]
    return track1_plot([e.row for e in table.ranked], below, threshold=result.threshold)


def _epsilon_plot(result: TrackResult) -> DrawnPlot:
    """A privacy track: every verified claim ranked in some budget, once."""
    verified = {e.row.id: e.row for t in result.tables.values() for e in t.ranked}
    return track2_plot(list(verified.values()), budgets=result.track.budgets,
                       delta=result.track.delta)  # fmt: skip


def _personal_plot(result: TrackResult) -> DrawnPlot:
    """A personalisation track: the top ranked submissions, per client."""
    (table,) = result.tables.values()
    return track3_plot([e.row for e in table.ranked[:TOP_PERSONAL]])


#: ``Track.plot`` -> the function that draws that plot of a track's rankings.
PLOTS: dict[str, Callable[[TrackResult], DrawnPlot]] = {
    "bytes": _bytes_plot,
    "epsilon": _epsilon_plot,
    "personal": _personal_plot,
}


def track_plot(result: TrackResult) -> DrawnPlot:
    """The plot of one track's rankings (:data:`PLOTS`), with what it drew.

    Raises:
        LookupError: the track has no plot, or none registered under its name.
    """
    if result.track.plot not in PLOTS:
        raise LookupError(f"track {result.track.number} has no plot ({result.track.plot!r})")
    return PLOTS[result.track.plot](result)
