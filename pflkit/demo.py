"""`make demo`: the kit's main job end to end on the embedded defaults.

Each step is a function that takes the demo directory and returns what the next steps need, so
the sequence reads top to bottom in `main`. Steps whose results already exist are reused, so a
second `make demo` is quick.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console

console = Console()

DEMO_SCALE = "mini"
DEMO_SEED = 0


def _pflkit(*args: str) -> subprocess.CompletedProcess:
    """Run a `pflkit` subcommand in this interpreter, failing the demo when it fails."""
    command = [sys.executable, "-m", "pflkit", *args]
    console.print(f"[dim]$ pflkit {' '.join(args)}[/dim]")
    return subprocess.run(command, check=True)


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


def show_statistics(data_dir: Path) -> None:
    """Print the per-client statistics table."""
    _pflkit("data", "stats", str(data_dir))


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("demo"), help="demo directory")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)

    console.rule("1. Data: synthetic mini-PFL-DocVQA in the real layout")
    data_dir = generate_data(args.out)
    show_statistics(data_dir)

    console.rule(f"done in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
