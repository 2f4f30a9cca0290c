"""The leaderboard in a real browser: uvicorn on localhost, Playwright driving Debian's chromium."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="Debian's chromium is missing: apt-get install -y chromium (make setup does it)",
)


def test_leaderboard_in_chromium(served_personal, tmp_path):
    from playwright.sync_api import sync_playwright

    served = served_personal
    ids = served.ids
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.goto(served.url + "/leaderboard", wait_until="load")
            rows = page.locator("#track1-ranked tbody tr")
            assert [rows.nth(i).get_attribute("data-id") for i in range(rows.count())] == [
                ids["alpha-nf4"], ids["beta-shampoo"], ids["gamma-at"],
            ]  # fmt: skip
            first = rows.nth(0).locator("td")
            assert first.nth(0).inner_text() == "1" and first.nth(1).inner_text() == "alpha"
            assert first.nth(3).inner_text() == "vt5" and first.nth(8).inner_text() == "7.7 MB"
            eps4 = page.locator("#track2-eps4-ranked tbody tr")
            assert eps4.count() == 2 and eps4.nth(0).locator("td").nth(1).inner_text() == "beta"
            track3 = page.locator("#track3-ranked tbody tr")
            assert [track3.nth(i).get_attribute("data-id") for i in range(track3.count())] == [
                ids["beta-local"], ids["alpha-ft"],
            ]  # fmt: skip
            cells = track3.nth(0).locator("td")
            assert [cells.nth(i).inner_text() for i in (0, 1, 3, 4, 5, 6, 7, 8)] == [
                "1", "beta", "vt5", "0.5219", "0.0812", "0.3904", "0.2702", "0 B",
            ]  # fmt: skip
            assert "no personalised score" in page.locator("#track3-unranked").text_content()
            for plot in ("#plot-track1", "#plot-track2", "#plot-track3"):
                page.locator(plot).scroll_into_view_if_needed()
                loaded = page.wait_for_function(
                    f"() => {{ const i = document.querySelector('{plot}');"
                    " return i.complete && i.naturalWidth > 0 && i.naturalWidth; }"
                )
                assert loaded.json_value() == 700
            page.screenshot(path=str(tmp_path / "leaderboard.png"), full_page=True)
            if os.environ.get("LEADERBOARD_SCREENSHOT"):
                target = Path(os.environ["LEADERBOARD_SCREENSHOT"])
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(tmp_path / "leaderboard.png", target)
            assert (tmp_path / "leaderboard.png").stat().st_size > 10_000

            page.locator("#track1-ranked tbody tr").nth(0).locator("a").click()
            page.wait_for_url(f"**/leaderboard/submissions/{ids['alpha-nf4']}")
            assert "LoRA + NF4" in page.locator("#submission-title").inner_text()
            # The public page is a summary: no per-round table (organisers see it).
            assert page.locator("#per-round tbody tr").count() == 0
            assert "0.8673" in page.locator("#scores").inner_text()
        finally:
            browser.close()
