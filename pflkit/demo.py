"""`make demo`: the kit's main job end to end on the embedded defaults.

Data, a track-1, a track-2 and a track-3 baseline, the evaluator with its embedded SQLite
database and queue, a team, the three submissions scored, and the leaderboard. Each step is a function; `main`
reads top to bottom. Steps whose results already exist are reused, so a second `make demo` is
quick. The server is left running until Ctrl-C, or stopped at the end with DEMO_KEEP_SERVER=0.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.table import Table

from benchmark.submission_contract import SUBMISSION_FILE
from benchmark.tracks import TRACKS

console = Console()

DEMO_SCALE = "mini"
DEMO_SEED = 0
#: A short track-1 run: the LoRA + NF4 recipe of the competition's winner, one round.
TRACK1 = ("--method", "lora-nf4", "--rounds", "1", "--local-epochs", "2", "--val-limit", "64")
#: A short track-2 run: DP-LoRA at epsilon 8, two rounds.
TRACK2 = ("--method", "dp-lora", "--epsilon", "8", "--rounds", "2", "--val-limit", "64")
#: A short track-3 run: `fedavg-ft` for one round with one client and no fine-tuning epoch: a
#: global model, one empty personalisation per client (each client uses the global model) and a
#: one-round log. It takes the track-3 path end to end (personal/ uploaded, per-client scoring,
#: leaderboard) in seconds; fine-tuning every client of `mini` for one epoch would take about
#: 5 minutes on 2 cores (the 2-epoch `local-only` run took 11), beyond the demo's budget.
TRACK3 = ("--method", "fedavg-ft", "--rounds", "1", "--clients-per-round", "1",
          "--finetune-epochs", "0", "--val-limit", "0")
TEAM = "demo-team"


def _pflkit(*args: str, capture: bool = False, log: Path | None = None
            ) -> subprocess.CompletedProcess:  # fmt: skip
    """Run a `pflkit` subcommand with this interpreter; a failure stops the demo.

    Args:
        args: the subcommand and its options.
        capture: return the output instead of printing it.
        log: write the output to this file instead of the console.
    """
    console.print(f"[dim]$ pflkit {' '.join(args)}[/dim]" + (f" [dim]> {log}[/dim]" if log else ""))
    if log is None:
        return subprocess.run([sys.executable, "-m", "pflkit", *args], check=True,
                              capture_output=capture, text=True)
    with log.open("w") as output:
        return subprocess.run([sys.executable, "-m", "pflkit", *args], check=True,
                              stdout=output, stderr=subprocess.STDOUT, text=True)


def generate_data(demo_dir: Path) -> Path:
    """Generate the `mini` benchmark once (reused when it is already there)."""
    data_dir = demo_dir / "data"
    marker = data_dir / "benchmark.json"
    if marker.is_file():
        settings = json.loads(marker.read_text(encoding="utf-8"))
        if settings.get("scale") == DEMO_SCALE and settings.get("seed") == DEMO_SEED:
            console.print(f"[green]reusing[/green] the {DEMO_SCALE} benchmark in {data_dir}")
            return data_dir
    _pflkit("data", "generate", "--scale", DEMO_SCALE, "--seed", str(DEMO_SEED),
            "--out", str(data_dir), "--overwrite")
    return data_dir


def train(data_dir: Path, run_dir: Path, options: tuple[str, ...], *, quiet: bool = False
          ) -> Path:  # fmt: skip
    """Train one baseline (reused when its submission already exists).

    Args:
        data_dir: the benchmark.
        run_dir: the run directory.
        options: the preset and its options.
        quiet: no progress bars; the output goes to ``RUN_DIR.log`` (a run trained beside
            another one).
    """
    if (run_dir / SUBMISSION_FILE).is_file():
        console.print(f"[green]reusing[/green] the finished run {run_dir}")
        return run_dir
    resume = ("--resume",) if run_dir.exists() else ()
    log = run_dir.with_suffix(".log") if quiet else None
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
    _pflkit("train", *options, "--data", str(data_dir), "--out", str(run_dir), "--threads", "1",
            *resume, *(("--no-progress",) if quiet else ()), log=log)
    return run_dir


def train_baselines(data_dir: Path, runs: Path) -> tuple[Path, Path, Path]:
    """The three baselines, on both cores: track 1 in the foreground (one torch thread, with its
    progress bars), tracks 2 and 3 one after the other beside it (one thread, output to a log);
    each run is seeded, so running side by side changes no figure."""
    with ThreadPoolExecutor(max_workers=1) as beside:
        others = beside.submit(lambda: (train(data_dir, runs / "track2-dp-lora-eps8", TRACK2,
                                              quiet=True),
                                        train(data_dir, runs / "track3-fedavg-ft-1client",
                                              TRACK3, quiet=True)))  # fmt: skip
        track1 = train(data_dir, runs / "track1-lora-nf4", TRACK1)
        track2, track3 = others.result()
    return track1, track2, track3


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_evaluator(demo_dir: Path, data_dir: Path) -> tuple[subprocess.Popen, str, str]:
    """Start `pflkit serve` (embedded worker, SQLite) and wait until /healthz answers."""
    storage = demo_dir / "evaluator"
    database = f"sqlite:///{(storage / 'evaluator.db').resolve()}"
    storage.mkdir(parents=True, exist_ok=True)
    port = int(os.environ.get("DEMO_PORT", _free_port()))
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "pflkit", "serve", "--port", str(port), "--db", database,
               "--data", str(data_dir), "--storage", str(storage)]
    console.print(f"[dim]$ pflkit {' '.join(command[3:])}[/dim]")
    log = open(storage / "server.log", "ab")  # noqa: SIM115 - lives as long as the server
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the evaluator exited; see {storage / 'server.log'}")
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2) as answer:
                if answer.status == 200:
                    return server, url, database
        except OSError:
            time.sleep(1)
    server.terminate()
    raise RuntimeError(f"the evaluator did not answer /healthz in 120 s; see {storage}")


def create_team(database: str) -> str:
    """Create the demo team and return its API token."""
    answer = _pflkit("team", "create", f"{TEAM}-{int(time.time())}", "--db", database, "--json",
                     capture=True)
    return json.loads(answer.stdout)["token"]


def submit(run_dir: Path, url: str, token: str) -> dict:
    """Upload a run directory and wait until it is scored."""
    answer = _pflkit("submit", str(run_dir), "--server", url, "--token", token, "--wait",
                     "--json", capture=True)
    result = json.loads(answer.stdout)
    personal = (result.get("results") or {}).get("personal_anls")
    console.print(f"submission {result.get('id')}: [bold]{result.get('status')}[/bold] "
                  f"ANLS {result.get('anls')} bytes {result.get('total_bytes')}"
                  + ("" if personal is None else f" personalised ANLS {personal}"))
    return result


def show_leaderboard(url: str) -> None:
    """Print every track as the API serves it: ranked rows, then unranked ones with the reason."""
    for track in sorted(TRACKS):
        with urllib.request.urlopen(f"{url}/api/v1/leaderboard?track={track}", timeout=30) as answer:
            board = json.loads(answer.read())
        rows = board["ranked"] + board["unranked"]
        title = f"Track {track}"
        if "threshold" in board:
            title += f" (ANLS threshold {board['threshold']:.4f}, {board['threshold_source']})"
        table = Table(title=title)
        columns = [key for key in ("budget", "rank", "team", "method", "anls", "personal_anls",
                                   "personal_anls_std", "global_unseen_anls", "total_bytes",
                                   "epsilon", "privacy_verified", "reason")
                   if any(row.get(key) is not None for row in rows)]
        for column in columns:
            table.add_column(column)
        for row in rows:
            table.add_row(*(_cell(row.get(column)) for column in columns))
        console.print(table)
    console.print(f"leaderboard: [link]{url}/leaderboard[/link]")


def _cell(value: object) -> str:
    """A table cell: floats to 4 decimals, missing values empty."""
    if value is None:
        return ""
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("demo"), help="demo directory")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    demo_dir = args.out.resolve()
    demo_dir.mkdir(parents=True, exist_ok=True)

    console.rule("1. Data: synthetic mini-PFL-DocVQA in the real layout")
    data_dir = generate_data(demo_dir)
    _pflkit("data", "stats", str(data_dir))

    console.rule("2. Baselines: track 1 (LoRA + NF4), track 2 (DP-LoRA, epsilon 8), "
                 "track 3 (fedavg-ft, one round, no fine-tuning)")
    track1, track2, track3 = train_baselines(data_dir, demo_dir / "runs")

    console.rule("3. Evaluator: server, team, submissions, scoring")
    server, url, database = start_evaluator(demo_dir, data_dir)
    try:
        token = create_team(database)
        for run_dir in (track1, track2, track3):
            submit(run_dir, url, token)
        console.rule("4. Leaderboard")
        show_leaderboard(url)
        console.rule(f"demo finished in {time.perf_counter() - started:.0f} s")
        if os.environ.get("DEMO_KEEP_SERVER", "1") != "0":
            console.print(f"the evaluator keeps running at {url}/leaderboard; Ctrl-C stops it")
            while server.poll() is None:
                time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        server.terminate()
        server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
