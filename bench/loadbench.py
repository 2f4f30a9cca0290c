"""Measure the leaderboard's page load with N submissions in the database (not a test).

``python -m bench.loadbench [--submissions 1000] [--repeat 10] [--db URL]`` fills a fresh
evaluator database (SQLite, or the empty PostgreSQL database of ``--db``) through
``evaluator.crud``, serves the evaluator with the leaderboard router on a localhost port with
uvicorn, and times real HTTP requests: the first (cold) and the median of ``--repeat`` warm
loads of each page, plot and export; then, for ``/leaderboard``, the first load after a new
score landed (the cache rebuilt) and again warm, and the same one second after a score landed
(time for the server's warmer to rebuild the page before the reader comes); and (with chromium installed) the full page
load in a browser.
"""

from __future__ import annotations

import json
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path

import click

PATHS = (
    "/leaderboard",
    "/leaderboard?all=true",
    "/leaderboard/plots/track1.png",
    "/leaderboard/plots/track2.png",
    "/api/v1/leaderboard?track=1",
    "/api/v1/leaderboard?track=2",
    "/api/v1/leaderboard.csv",
)


CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


def _browser_load(url: str, repeat: int) -> dict[str, float | int]:
    """Navigation start to the load event (HTML, stylesheet and both plot images) in chromium."""
    from playwright.sync_api import sync_playwright

    def once(page) -> float:  # type: ignore[no-untyped-def]
        page.goto(url + "/leaderboard", wait_until="load")
        return page.evaluate(
            "() => { const n = performance.getEntriesByType('navigation')[0];"
            " return n.loadEventEnd - n.startTime; }"
        )

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_context().new_page()
            cold = once(page)
            warm = [once(page) for _ in range(repeat)]
        finally:
            browser.close()
    return {
        "cold_ms": round(cold, 1),
        "warm_median_ms": round(statistics.median(warm), 1),
        "bytes": 0,
    }


def _after_a_score(
    client, db_url: str, repeat: int, *, wait: float = 0.0
) -> dict[str, float | int]:  # type: ignore[no-untyped-def]
    """Land a new top score, wait ``wait`` seconds, then time the first ``/leaderboard`` (built
    by this request, or already by the server's warmer) and warm ones."""
    from bench.seed_leaderboard import add_submission
    from evaluator.core.db import session_factory

    team = f"late-team-{time.time_ns()}"
    with session_factory(db_url)() as session:
        add_submission(session, team=team, track=1, method="late", anls=0.99,
                       accuracy=0.9, total_bytes=1, bytes_up=1, bytes_down=0, rounds=1)  # fmt: skip
    time.sleep(wait)
    began = time.perf_counter()
    response = client.get("/leaderboard")
    rebuilt = time.perf_counter() - began
    response.raise_for_status()
    if team not in response.text:
        raise click.ClickException("the new score is missing from the page: stale cache")
    warm = []
    for _ in range(repeat):
        began = time.perf_counter()
        client.get("/leaderboard").raise_for_status()
        warm.append(time.perf_counter() - began)
    return {
        "cold_ms": round(rebuilt * 1000, 1),
        "warm_median_ms": round(statistics.median(warm) * 1000, 1),
        "bytes": len(response.content),
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@click.command()
@click.option("--submissions", default=1000, show_default=True, type=click.IntRange(1))
@click.option("--teams", default=50, show_default=True, type=click.IntRange(1))
@click.option("--repeat", default=10, show_default=True, type=click.IntRange(1))
@click.option(
    "--browser/--no-browser",
    default=True,
    help="also time full page loads (HTML, CSS, both plots) in Debian's chromium",
)
@click.option("--db", "database_url", default=None, help="an empty database (default SQLite)")
@click.option("--json", "as_json", is_flag=True, help="print the figures as JSON")
def main(
    submissions: int,
    teams: int,
    repeat: int,
    browser: bool,
    database_url: str | None,
    as_json: bool,
) -> None:
    """Time the leaderboard pages with SUBMISSIONS rows in a real database."""
    import httpx
    import uvicorn
    from tqdm import tqdm

    from bench.seed_leaderboard import fill_random
    from evaluator.core.config import Settings
    from evaluator.core.db import migrate, session_factory
    from pflkit.app import create_app

    with tempfile.TemporaryDirectory(prefix="lb-bench-") as tmp:
        settings = Settings(storage_dir=Path(tmp), embedded_worker=False, database_url=database_url)
        migrate(settings.db_url)
        started = time.perf_counter()
        with session_factory(settings.db_url)() as session:
            for start in tqdm(range(0, submissions, 100), desc="filling", unit="x100"):
                fill_random(session, n=min(100, submissions - start), teams=teams, seed=start)
        fill_seconds = time.perf_counter() - started
        port = _free_port()
        server = uvicorn.Server(
            uvicorn.Config(
                create_app(settings, migrate_database=False),
                host="127.0.0.1",
                port=port,
                log_level="warning",
            )  # fmt: skip
        )
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        url = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=url, timeout=60) as client:
            while True:
                try:
                    client.get("/healthz")
                    break
                except httpx.HTTPError:
                    time.sleep(0.05)
            figures = {}
            for path in PATHS:
                began = time.perf_counter()
                response = client.get(path)
                cold = time.perf_counter() - began
                response.raise_for_status()
                warm = []
                for _ in range(repeat):
                    began = time.perf_counter()
                    client.get(path).raise_for_status()
                    warm.append(time.perf_counter() - began)
                figures[path] = {
                    "cold_ms": round(cold * 1000, 1),
                    "warm_median_ms": round(statistics.median(warm) * 1000, 1),
                    "bytes": len(response.content),
                }
            figures["/leaderboard after a score landed"] = _after_a_score(
                client, settings.db_url, repeat
            )
            figures["/leaderboard 1 s after a score"] = _after_a_score(
                client, settings.db_url, repeat, wait=1.0
            )
        if browser and CHROMIUM.exists():
            figures["browser /leaderboard (load event)"] = _browser_load(url, repeat)
        server.should_exit = True
        thread.join(timeout=10)
    if as_json:
        click.echo(json.dumps({"submissions": submissions, "fill_seconds": round(fill_seconds, 1),
                               "database": settings.db_url.split(":", 1)[0],
                               "paths": figures}, indent=2))  # fmt: skip
        return
    database = settings.db_url.split(":", 1)[0]
    click.echo(
        f"{submissions} submissions ({teams} teams) in {database}, filled in {fill_seconds:.1f} s"
    )
    click.echo(f"{'path':<36} {'cold ms':>9} {'warm ms':>9} {'size':>9}")
    for path, f in figures.items():
        click.echo(f"{path:<36} {f['cold_ms']:>9} {f['warm_median_ms']:>9} {f['bytes']:>9}")


if __name__ == "__main__":
    main()
