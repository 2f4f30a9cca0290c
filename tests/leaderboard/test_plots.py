"""The tracks' plots: every submission inside its axes, every legend entry visible, the map of
what was drawn true to the image (checked on the PNG's own pixels)."""

from __future__ import annotations

import datetime as dt
import io

import pytest
from PIL import Image

from leaderboard.plot_canvas import DrawnPlot, DrawnPoint, padded
from leaderboard.plots import track1_plot, track2_plot, track3_plot
from leaderboard.ranking import Row

T0 = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
#: the demo's board: its one track-1 run below the threshold of `mini`.
DEMO_ANLS, DEMO_BYTES, MINI_THRESHOLD = 0.3380, 67_136, 0.4156
#: how far an antialiased marker pixel may be from its colour, per channel.
TOLERANCE = 60


def row(id: str, team: str, track: int, **figures: object) -> Row:
    return Row(id=id, team=team, track=track, method="m", status="finished", created_at=T0,
               **figures)  # fmt: skip


def personal_row(id: str, team: str, personal: list[float], shared: list[float]) -> Row:
    clients = [{"client": k, "n": 10, "personal_anls": p, "global_anls": g}
               for k, (p, g) in enumerate(zip(personal, shared, strict=True))]  # fmt: skip
    return row(id, team, 3, anls=0.3, personal_clients=clients)


def marker_drawn(drawn: DrawnPlot, point: DrawnPoint) -> bool:
    """Whether the PNG holds a pixel of the point's colour within its marker's box."""
    image = Image.open(io.BytesIO(drawn.png)).convert("RGB")
    assert image.size == (drawn.width, drawn.height)
    want = tuple(int(point.colour[i : i + 2], 16) for i in (1, 3, 5))
    reach = int(point.radius) + 1
    for x in range(round(point.px) - reach, round(point.px) + reach + 1):
        for y in range(round(point.py) - reach, round(point.py) + reach + 1):
            pixel = image.getpixel((x, y))
            if all(abs(a - b) <= TOLERANCE for a, b in zip(pixel, want, strict=True)):
                return True
    return False


def assert_shows_everything(drawn: DrawnPlot) -> None:
    assert drawn.outside() == []
    assert drawn.under_legend() == []
    assert drawn.unseen_legend() == []
    hidden = [p.submission for p in drawn.points if not marker_drawn(drawn, p)]
    assert hidden == [], f"no pixel of their marker's colour where the map puts them: {hidden}"


def test_track1_shows_the_demos_only_point_below_the_threshold() -> None:
    demo = row("demo", "demo", 1, anls=DEMO_ANLS, total_bytes=DEMO_BYTES)

    drawn = track1_plot([], [demo], threshold=MINI_THRESHOLD)

    (point,) = drawn.points
    assert (point.submission, point.series, point.filled) == ("demo", "below threshold", False)
    assert drawn.ylim[0] < DEMO_ANLS < MINI_THRESHOLD < drawn.ylim[1]
    assert drawn.xlim[0] < DEMO_BYTES < drawn.xlim[1] and drawn.xscale == "log"
    (threshold,) = drawn.lines
    assert threshold.series == "threshold 0.4156" and threshold.position < point.py
    assert drawn.legend == ("below threshold", "threshold 0.4156")
    assert_shows_everything(drawn)


def test_track1_holds_ranked_and_below_threshold_points_decades_apart() -> None:
    ranked = [row("big", "a", 1, anls=0.9, total_bytes=10**10),
              row("small", "b", 1, anls=0.86, total_bytes=2 * 10**6)]  # fmt: skip
    below = [row("low", "c", 1, anls=0.05, total_bytes=1000)]

    drawn = track1_plot(ranked, below, threshold=0.85)

    assert {p.submission: p.series for p in drawn.points} == {
        "big": "ranked", "small": "ranked", "low": "below threshold"}  # fmt: skip
    assert drawn.legend == ("ranked", "below threshold", "threshold 0.8500")
    assert_shows_everything(drawn)


def test_track2_holds_a_claim_near_zero_and_every_budget() -> None:
    claims = [row("tiny", "a", 2, anls=0.2, epsilon=0.01),
              row("eight", "b", 2, anls=0.7, epsilon=8.0)]  # fmt: skip

    drawn = track2_plot(claims, budgets=(1.0, 4.0, 8.0))

    assert {p.submission for p in drawn.points} == {"tiny", "eight"}
    assert [line.value for line in drawn.lines] == [1.0, 4.0, 8.0]
    assert drawn.legend == ("verified claims",)
    assert_shows_everything(drawn)


def test_track3_shows_the_global_markers_of_a_personalisation_that_changed_nothing() -> None:
    # The demo's fedavg-ft: empty personalisations, so each client's two figures are equal.
    unchanged = personal_row("demo", "demo", [0.25, 0.33, 0.41], [0.25, 0.33, 0.41])
    better = personal_row("best", "$\\frac{a}$", [1.0, 0.9, 0.8], [0.5, 0.5, 0.5])

    drawn = track3_plot([better, unchanged])

    assert drawn.legend == ("1. \\$\\frac{a}\\$: personalised", "1. \\$\\frac{a}\\$: global",
                            "2. demo: personalised", "2. demo: global")  # fmt: skip
    demo = [p for p in drawn.points if p.submission == "demo"]
    assert len(demo) == 6
    for shared in (p for p in demo if not p.filled):
        own = next(p for p in demo if p.filled and p.y == shared.y)
        assert own.px - shared.px >= own.radius + shared.radius  # side by side, not stacked
    assert drawn.ylim[0] < 0.25 and drawn.ylim[1] > 1.0
    assert_shows_everything(drawn)


def test_the_checks_name_a_point_outside_the_axes_under_the_legend_or_hidden() -> None:
    def point(series: str, px: float, filled: bool) -> DrawnPoint:
        return DrawnPoint(series, series, "t", 0.0, 0.0, px, 50.0, 3.0, filled, "#000000")

    drawn = DrawnPlot(png=b"", width=100, height=100, axes=(10.0, 10.0, 90.0, 90.0),
                      xlim=(0.0, 1.0), ylim=(0.0, 1.0), xscale="linear",
                      points=(point("under", 50.0, False), point("over", 51.0, True),
                              point("edge", 88.0, True)),
                      lines=(), legend=("under", "over", "edge"),
                      legend_box=(80.0, 40.0, 99.0, 60.0))  # fmt: skip

    (problem,) = drawn.outside()
    assert problem.startswith("edge point of submission edge") and "not inside the axes" in problem
    assert drawn.under_legend() == ["edge"]
    assert drawn.unseen_legend() == ["under"]


@pytest.mark.parametrize(
    ("values", "log", "inside"),
    [([0.338], False, [0.338]), ([0.338, 0.4156], False, [0.338, 0.4156]),
     ([67_136.0], True, [67_136.0]), ([1e3, 1e10], True, [1e3, 1e10])],
)  # fmt: skip
def test_padded_limits_leave_a_margin_around_every_value(
    values: list[float], log: bool, inside: list[float]
) -> None:
    low, high = padded(values, log=log)
    assert all(low < v < high for v in inside)


def test_the_map_reads_back_as_the_plot_it_describes() -> None:
    drawn = track1_plot([row("a", "a", 1, anls=0.9, total_bytes=10**6)], [], threshold=0.85)

    assert DrawnPlot.from_dict(drawn.as_dict(), drawn.png) == drawn
