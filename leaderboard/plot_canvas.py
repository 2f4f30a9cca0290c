"""A plot that records what it drew: the PNG, and where each point and line landed on it.

:class:`PlotCanvas` wraps one matplotlib figure (Agg, one axes). The leaderboard's plots
(``leaderboard.plots``) draw their submissions through it, so that every point carries its
submission's id and series, and every line its series. :meth:`PlotCanvas.finish` fits the axes'
limits to everything drawn (every point and line inside, with a margin), puts the legend
outside the axes (it can never hide a point) and returns a :class:`DrawnPlot`: the PNG, the
axes' box and each point's position in the image's pixels, and the legend's entries. The page
serves it beside the image (``/leaderboard/plots/track{n}.json``), and the tests check from it
that every plotted submission lies inside its axes and that every legend entry names something
visible.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

#: the figure's size in inches and its resolution: 700 x 360 pixels.
SIZE = (7.0, 3.6)
DPI = 100
_WIDTH, _HEIGHT = round(SIZE[0] * DPI), round(SIZE[1] * DPI)
#: the share of the data's span left free on each side of the axes.
MARGIN = 0.08
#: a marker's area in points squared (matplotlib's ``s``).
MARKER_AREA = 24.0


@dataclass(frozen=True, slots=True)
class Point:
    """One submission's point as a plot gives it to the canvas.

    Attributes:
        submission: the submission's id.
        team: its team.
        x, y: its position in data coordinates.
    """

    submission: str
    team: str
    x: float
    y: float


@dataclass(frozen=True, slots=True)
class DrawnPoint:
    """A point as drawn: its series, its submission, and where it landed on the image.

    Attributes:
        series: the legend entry of its series.
        submission: the submission's id.
        team: its team.
        x, y: its position in data coordinates.
        px, py: its centre in the image's pixels (from the top-left corner).
        radius: the marker's radius in pixels.
        filled: whether the marker is filled (a hollow one hides nothing under it).
        colour: the marker's colour (``#rrggbb``: its fill, or a hollow one's edge).
    """

    series: str
    submission: str
    team: str
    x: float
    y: float
    px: float
    py: float
    radius: float
    filled: bool
    colour: str


@dataclass(frozen=True, slots=True)
class DrawnLine:
    """A horizontal (``axis="y"``) or vertical (``axis="x"``) line across the axes.

    Attributes:
        series: its legend entry (empty: a guide the legend does not name).
        axis: ``"y"`` for a horizontal line at ``value``, ``"x"`` for a vertical one.
        value: where it is, in data coordinates.
        position: where it is in the image's pixels (``py`` of a horizontal line, ``px`` of a
            vertical one).
    """

    series: str
    axis: str
    value: float
    position: float


@dataclass(frozen=True, slots=True)
class DrawnPlot:
    """A finished plot: the PNG and what was drawn on it, in the image's pixels.

    Attributes:
        png: the image.
        width, height: its size in pixels.
        axes: the axes' box in pixels: left, top, right, bottom (from the top-left corner).
        xlim, ylim: the axes' limits in data coordinates.
        xscale: ``linear`` or ``log``.
        points: every point drawn, in drawing order (a later filled marker covers an earlier
            one).
        lines: every line drawn across the axes.
        legend: the legend's entries, in order.
        legend_box: the legend's box in pixels, like ``axes`` (None: no legend).
    """

    png: bytes = field(repr=False)
    width: int
    height: int
    axes: tuple[float, float, float, float]
    xlim: tuple[float, float]
    ylim: tuple[float, float]
    xscale: str
    points: tuple[DrawnPoint, ...]
    lines: tuple[DrawnLine, ...]
    legend: tuple[str, ...]
    legend_box: tuple[float, float, float, float] | None = None

    def as_dict(self) -> dict[str, Any]:
        """What was drawn, without the image (the JSON the page serves beside it)."""
        left, top, right, bottom = self.axes
        return {
            "width": self.width, "height": self.height,
            "axes": {"left": left, "top": top, "right": right, "bottom": bottom},
            "xlim": list(self.xlim), "ylim": list(self.ylim), "xscale": self.xscale,
            "points": [asdict(p) for p in self.points],
            "lines": [asdict(line) for line in self.lines],
            "legend": list(self.legend),
            "legend_box": None if self.legend_box is None else dict(zip(
                ("left", "top", "right", "bottom"), self.legend_box, strict=True)),
        }  # fmt: skip

    @classmethod
    def from_dict(cls, drawn: dict[str, Any], png: bytes = b"") -> DrawnPlot:
        """A plot read back from :meth:`as_dict` (e.g. the page's JSON), with ``png``."""
        sides = ("left", "top", "right", "bottom")
        legend_box = drawn["legend_box"]
        return cls(
            png=png, width=drawn["width"], height=drawn["height"],
            axes=tuple(drawn["axes"][side] for side in sides),  # type: ignore[arg-type]
            xlim=tuple(drawn["xlim"]), ylim=tuple(drawn["ylim"]),  # type: ignore[arg-type]
            xscale=drawn["xscale"], points=tuple(DrawnPoint(**p) for p in drawn["points"]),
            lines=tuple(DrawnLine(**line) for line in drawn["lines"]),
            legend=tuple(drawn["legend"]),
            legend_box=None if legend_box is None else tuple(legend_box[s] for s in sides),  # type: ignore[arg-type]
        )  # fmt: skip

    def outside(self) -> list[str]:
        """The points and lines not wholly inside the axes, each named in a sentence."""
        left, top, right, bottom = self.axes
        problems = [
            f"{p.series} point of submission {p.submission} ({p.x:g}, {p.y:g}) at pixel "
            f"({p.px}, {p.py}) with radius {p.radius} is not inside the axes {self.axes}"
            for p in self.points
            if not (left <= p.px - p.radius and p.px + p.radius <= right
                    and top <= p.py - p.radius and p.py + p.radius <= bottom)
        ]  # fmt: skip
        for line in self.lines:
            low, high = (top, bottom) if line.axis == "y" else (left, right)
            if not low <= line.position <= high:
                problems.append(f"line {line.series or line.value} at pixel {line.position} is "
                                f"outside the axes {self.axes}")  # fmt: skip
        return problems

    def under_legend(self) -> list[str]:
        """The submissions whose marker the legend's box overlaps."""
        if self.legend_box is None:
            return []
        left, top, right, bottom = self.legend_box
        return [p.submission for p in self.points
                if left - p.radius < p.px < right + p.radius
                and top - p.radius < p.py < bottom + p.radius]  # fmt: skip

    def unseen_legend(self) -> list[str]:
        """The legend's entries with nothing visible drawn: no line, and every point of theirs
        hidden by a marker of another series (:func:`_hides`)."""
        visible = {line.series for line in self.lines}
        for index, point in enumerate(self.points):
            if point.series in visible:
                continue
            if not any(_hides(other, point, later=at > index)
                       for at, other in enumerate(self.points) if at != index):  # fmt: skip
                visible.add(point.series)
        return [entry for entry in self.legend if entry not in visible]


def _hides(other: DrawnPoint, point: DrawnPoint, *, later: bool) -> bool:
    """Whether ``other``'s marker hides ``point``'s: a filled marker drawn later over its
    centre, or, for a hollow ``point``, a filled marker of the same colour under or over it
    whose disc holds its whole ring (the ring cannot be told from the disc's edge)."""
    if other.series == point.series or not other.filled:
        return False
    distance = math.dist((other.px, other.py), (point.px, point.py))
    if later and distance < other.radius:
        return True
    same = other.colour == point.colour
    return not point.filled and same and distance + point.radius <= other.radius + 0.5


@dataclass
class _Series:
    label: str
    points: list[Point]
    filled: bool
    area: float
    colour: str


class PlotCanvas:
    """One figure with one axes that records its points and lines as it draws them.

    Args:
        title: the axes' title.
        xlabel, ylabel: the axes' labels.
        xscale: ``linear`` or ``log`` (a log axis takes positive x only).
    """

    def __init__(self, *, title: str, xlabel: str, ylabel: str, xscale: str = "linear") -> None:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib.figure import Figure

        self.figure = Figure(figsize=SIZE, dpi=DPI, layout="constrained")
        self.axes = self.figure.add_subplot()
        self.axes.set_title(title)
        self.axes.set_xlabel(xlabel)
        self.axes.set_ylabel(ylabel)
        self.axes.set_xscale(xscale)
        self.axes.grid(True, which="major", alpha=0.3)
        self.xscale = xscale
        self._series: list[_Series] = []
        self._lines: list[tuple[str, str, float]] = []

    def points(self, label: str, points: Sequence[Point], *, colour: str, filled: bool = True,
               area: float = MARKER_AREA) -> None:  # fmt: skip
        """Draw a series of points (nothing when empty: the legend names only what is drawn).

        Args:
            label: its legend entry (``_`` first: none).
            points: the points, one per submission.
            colour: the markers' colour.
            filled: filled markers, else hollow ones (a hollow marker's edge in ``colour``).
            area: the markers' area in points squared.
        """
        if not points:
            return
        if self.xscale == "log" and any(p.x <= 0 for p in points):
            raise ValueError(f"series {label!r}: a log axis cannot place x <= 0")
        style = {"color": colour} if filled else {"facecolors": "none", "edgecolors": colour}
        self.axes.scatter([p.x for p in points], [p.y for p in points], s=area,
                          label=label, zorder=3, **style)  # fmt: skip
        self._series.append(_Series(label, list(points), filled, area, colour))

    def line(self, label: str, axis: str, value: float, **style: Any) -> None:
        """Draw a line across the axes: horizontal at ``y = value`` (``axis="y"``) or vertical
        at ``x = value`` (``axis="x"``); ``label`` empty or ``_`` first: no legend entry."""
        draw = self.axes.axhline if axis == "y" else self.axes.axvline
        draw(value, label=label or "_", **style)
        self._lines.append((label, axis, value))

    def joins(self, segments: Sequence[tuple[Point, Point]], *, colour: str) -> None:
        """Draw a segment between each pair of points (drawn as points too: recorded there)."""
        for start, end in segments:
            self.axes.plot([start.x, end.x], [start.y, end.y], color=colour, linewidth=1,
                           alpha=0.6, label="_", zorder=2)  # fmt: skip

    def names(self, points: Sequence[Point], *, colour: str) -> None:
        """Write each point's team beside it (plain text: a name such as ``$\\frac{a}$`` is
        not parsed as mathtext)."""
        for p in points:
            self.axes.annotate(p.team, (p.x, p.y), textcoords="offset points", xytext=(4, 4),
                               fontsize=7, color=colour, parse_math=False)  # fmt: skip

    def finish(self, *, legend_columns: int = 3,
               extra_x: Iterable[float] = (), extra_y: Iterable[float] = ()) -> DrawnPlot:  # fmt: skip
        """Fit the limits to everything drawn, place the legend outside the axes, render.

        Args:
            legend_columns: the legend's columns (it sits under the axes).
            extra_x, extra_y: further values the axes must show (e.g. 0 on an epsilon axis).

        Returns:
            The PNG and what was drawn on it.
        """
        points = [p for s in self._series for p in s.points]
        xs = [p.x for p in points] + [v for _, a, v in self._lines if a == "x"] + list(extra_x)
        ys = [p.y for p in points] + [v for _, a, v in self._lines if a == "y"] + list(extra_y)
        if xs:
            self.axes.set_xlim(padded(xs, log=self.xscale == "log"))
        if ys:
            self.axes.set_ylim(padded(ys))
        handles, labels = self.axes.get_legend_handles_labels()
        legend = None
        if handles:
            legend = self.figure.legend(handles, labels, loc="outside lower center", fontsize=8,
                                        ncols=min(legend_columns, len(handles)))  # fmt: skip
        buffer = io.BytesIO()
        self.figure.savefig(buffer, format="png", dpi=DPI)
        return self._drawn(buffer.getvalue(), tuple(labels), legend)

    def _drawn(self, png: bytes, labels: tuple[str, ...], legend: Any) -> DrawnPlot:
        """What the last render drew, in the image's pixels (read after ``savefig``)."""
        return DrawnPlot(
            png=png, width=_WIDTH, height=_HEIGHT, axes=_box(self.axes.get_window_extent()),
            xlim=tuple(float(v) for v in self.axes.get_xlim()),  # type: ignore[arg-type]
            ylim=tuple(float(v) for v in self.axes.get_ylim()),  # type: ignore[arg-type]
            xscale=self.xscale, points=self._drawn_points(), lines=self._drawn_lines(),
            legend=labels, legend_box=None if legend is None else _box(legend.get_window_extent()),
        )  # fmt: skip

    def _drawn_points(self) -> tuple[DrawnPoint, ...]:
        from matplotlib.colors import to_hex

        to_pixels = self.axes.transData.transform
        drawn = []
        for series in self._series:
            radius = round(math.sqrt(series.area) / 2 * DPI / 72, 2)
            colour = to_hex(series.colour)
            pixels = to_pixels([(p.x, p.y) for p in series.points]).tolist()  # one call a series
            for p, (px, py) in zip(series.points, pixels, strict=True):
                drawn.append(DrawnPoint(series.label, p.submission, p.team, p.x, p.y,
                                        round(px, 1), round(_HEIGHT - py, 1), radius,
                                        series.filled, colour))  # fmt: skip
        return tuple(drawn)

    def _drawn_lines(self) -> tuple[DrawnLine, ...]:
        to_pixels = self.axes.transData.transform
        drawn = []
        for label, axis, value in self._lines:
            px, py = (float(v) for v in to_pixels((value, value)))
            position = _HEIGHT - py if axis == "y" else px
            drawn.append(DrawnLine(label, axis, value, round(position, 1)))
        return tuple(drawn)


def _box(extent: Any) -> tuple[float, float, float, float]:
    """A display box (origin bottom-left) as the image's left, top, right, bottom pixels."""
    return (round(float(extent.x0), 1), round(_HEIGHT - float(extent.y1), 1),
            round(float(extent.x1), 1), round(_HEIGHT - float(extent.y0), 1))  # fmt: skip


def padded(values: Sequence[float], *, log: bool = False) -> tuple[float, float]:
    """Limits that hold every value with a margin of :data:`MARGIN` of their span each side
    (on a log axis, of their span in decades; a single value gets a margin of its own).

    Args:
        values: the values the axis must show (positive on a log axis).
        log: a log axis.

    Returns:
        The low and high limits.
    """
    scaled = [math.log10(v) for v in values] if log else list(values)
    low, high = min(scaled), max(scaled)
    span = high - low
    margin = MARGIN * span if span > 0 else (0.5 if log else 0.05 * max(abs(high), 1.0))
    low, high = low - margin, high + margin
    return (10**low, 10**high) if log else (low, high)
