"""Every plotted submission inside its axes, as chromium renders the leaderboard page.

Each plot's image names the map of what it drew (``data-drawn``: the axes' box, each point and
line in the image's pixels, ``leaderboard.plot_canvas.DrawnPlot``). In the browser, the axes'
box and each point are placed on the image as rendered (at full width and scaled down on a
narrow screen); every marker must lie inside the rendered axes, and the image's own pixels must
hold the marker's colour where the map puts it. On a board with the demo's two cases: a lone
track-1 point far below the threshold, and a track-3 personalisation that changed nothing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import httpx
import pytest

from leaderboard.plot_canvas import DrawnPlot
from tests.leaderboard.conftest import T0, Served, fill_known, fill_personal, start_server
from tests.leaderboard.test_browser import CHROMIUM, CHROMIUM_ARGS

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="Debian's chromium is missing: apt-get install -y chromium (make setup does it)",
)
#: how far an antialiased marker pixel may be from its colour, per channel.
TOLERANCE = 60
#: each rendered point's problems: outside the rendered axes, the axes outside the image, or
#: no pixel of its colour in its marker's box.
PLACE_POINTS = """([selector, drawn, tolerance]) => {
  const img = document.querySelector(selector);
  const box = img.getBoundingClientRect();
  const sx = box.width / img.naturalWidth, sy = box.height / img.naturalHeight;
  const axes = {left: box.left + drawn.axes.left * sx, top: box.top + drawn.axes.top * sy,
                right: box.left + drawn.axes.right * sx, bottom: box.top + drawn.axes.bottom * sy};
  const problems = [];
  if (axes.left < box.left || axes.right > box.right || axes.top < box.top
      || axes.bottom > box.bottom) problems.push(`axes ${JSON.stringify(axes)} outside the image`);
  const canvas = document.createElement("canvas");
  canvas.width = img.naturalWidth;
  canvas.height = img.naturalHeight;
  const context = canvas.getContext("2d");
  context.drawImage(img, 0, 0);
  const hex = (c) => [1, 3, 5].map((i) => parseInt(c.slice(i, i + 2), 16));
  for (const p of drawn.points) {
    const x = box.left + p.px * sx, y = box.top + p.py * sy, rx = p.radius * sx, ry = p.radius * sy;
    const name = `${p.series} point of ${p.submission} at (${x.toFixed(1)}, ${y.toFixed(1)})`;
    if (!(axes.left <= x - rx && x + rx <= axes.right && axes.top <= y - ry && y + ry <= axes.bottom))
      problems.push(`${name} is outside the rendered axes ${JSON.stringify(axes)}`);
    const reach = Math.ceil(p.radius) + 1, side = 2 * reach + 1;
    const pixels = context.getImageData(Math.round(p.px) - reach, Math.round(p.py) - reach,
                                        side, side).data;
    const want = hex(p.colour);
    let found = false;
    for (let i = 0; i < pixels.length && !found; i += 4)
      found = want.every((v, c) => Math.abs(pixels[i + c] - v) <= tolerance);
    if (!found) problems.push(`${name}: no pixel of ${p.colour} in its marker's box`);
  }
  return problems;
}"""


def fill_demo_personal(db_url: str) -> str:
    """A track-3 row like the demo's fedavg-ft: empty personalisations, so each client's
    personalised ANLS is its global model's."""
    from bench.seed_leaderboard import add_submission
    from evaluator.core.db import session_factory

    clients = [{"client": k, "n": 5 + k, "personal_anls": anls, "global_anls": anls,
                "personalised": False} for k, anls in enumerate((0.2214, 0.3309, 0.4402))]  # fmt: skip
    with session_factory(db_url)() as session:
        return add_submission(
            session, team="demo", track=3, method="fedavg-ft",
            created_at=T0 + dt.timedelta(minutes=50), anls=0.35, anls_out=0.3,
            personal_anls=0.3309, personal_anls_std=0.0899, personal_worst_client=0,
            personal_worst_anls=0.2214, global_personal_anls=0.3309, global_unseen_anls=0.3,
            n_personal=18, personal_clients=clients, total_bytes=4_000_000,
        )  # fmt: skip


@pytest.fixture(scope="module")
def served_demo_cases(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """Every track's hand-made rows and the demo's track-3 row."""
    url, db_url, thread, server = start_server(tmp_path_factory.mktemp("lb-plots"))
    try:
        ids = fill_known(db_url) | fill_personal(db_url)
        yield Served(url=url, db_url=db_url, ids=ids | {"demo-ft": fill_demo_personal(db_url)})
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def expected_points(ids: dict[str, str]) -> dict[str, set[str]]:
    """The submissions each plot must draw: every scored track-1 row that has bytes (ranked or
    below the threshold), every verified claim, the top three of track 3."""
    track1 = {"alpha-lora", "alpha-nf4", "beta-shampoo", "gamma-at", "delta-low"}
    return {
        "#plot-track1": {ids[k] for k in track1},
        "#plot-track2": {ids["alpha-dp1"], ids["beta-dp4"]},
        "#plot-track3": {ids["beta-local"], ids["alpha-ft"], ids["demo-ft"]},
    }


def drawn_maps(served: Served, page) -> dict[str, DrawnPlot]:  # type: ignore[no-untyped-def]
    """Each plot's map, from the URL its image names."""
    maps = {}
    for selector in ("#plot-track1", "#plot-track2", "#plot-track3"):
        answer = httpx.get(served.url + page.locator(selector).get_attribute("data-drawn"))
        assert answer.status_code == 200, answer.text
        maps[selector] = DrawnPlot.from_dict(answer.json())
    return maps


def rendered_problems(page, maps: dict[str, DrawnPlot]) -> dict[str, list[str]]:  # type: ignore[no-untyped-def]
    """Each plot's rendered problems (:data:`PLACE_POINTS`), after its image has loaded."""
    problems = {}
    for selector, drawn in maps.items():
        page.locator(selector).scroll_into_view_if_needed()
        page.wait_for_function(f"() => document.querySelector('{selector}').complete "
                               f"&& document.querySelector('{selector}').naturalWidth > 0")  # fmt: skip
        problems[selector] = page.evaluate(PLACE_POINTS, [selector, drawn.as_dict(), TOLERANCE])
    return problems


def test_every_plotted_submission_is_inside_its_rendered_axes(served_demo_cases) -> None:
    from playwright.sync_api import sync_playwright

    served = served_demo_cases
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.goto(served.url + "/leaderboard", wait_until="load")
            maps = drawn_maps(served, page)
            for selector, ids in expected_points(served.ids).items():
                assert {p.submission for p in maps[selector].points} == ids, selector
            demo = [p for p in maps["#plot-track3"].points if p.submission == served.ids["demo-ft"]]
            assert sorted(p.filled for p in demo) == [False] * 3 + [True] * 3
            for selector, drawn in maps.items():
                assert drawn.outside() == [], selector
                assert drawn.under_legend() == [], selector
                assert drawn.unseen_legend() == [], selector
            full = rendered_problems(page, maps)
            page.set_viewport_size({"width": 420, "height": 900})  # the images scale down
            assert page.locator("#plot-track1").bounding_box()["width"] < 400
            narrow = rendered_problems(page, maps)
        finally:
            browser.close()
    assert full == {selector: [] for selector in maps}
    assert narrow == {selector: [] for selector in maps}
