"""Command-line group of the `leaderboard` package (wired into `pflkit` by pflkit/cli.py).

``pflkit leaderboard show`` prints every track's tables (or one, or JSON) from the evaluator's
database; ``pflkit leaderboard export`` writes them as CSV.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from benchmark.result_figures import Figure
from benchmark.tracks import COMMUNICATION, TRACKS, Track

#: the figures :func:`_print_table` shows: a track ranked on another shows its figures' table.
_SCORE_COLUMNS = ("anls", "anls_in", "anls_out", "accuracy", "total_bytes", "epsilon")

_DB = click.option(
    "--db",
    "database_url",
    default=None,
    metavar="URL",
    help="evaluator database URL (default: the evaluator's setting, "
    "env PFLKIT_EVALUATOR_DATABASE_URL or the SQLite file in its storage directory)",
)
_STORAGE = click.option(
    "--storage",
    "storage_dir",
    default=None,
    type=click.Path(path_type=Path),
    help="the evaluator's storage directory (env PFLKIT_EVALUATOR_STORAGE_DIR)",
)
_DATA = click.option(
    "--data",
    "data_dir",
    default=None,
    type=click.Path(path_type=Path),
    help="benchmark directory whose benchmark.json may state the tracks' thresholds "
    "(track1_threshold)",
)
_THRESHOLD = click.option(
    "--threshold",
    type=click.FloatRange(0, 1),
    default=None,
    help="track-1 ANLS threshold (default: benchmark.json, else PFLKIT_LEADERBOARD_THRESHOLD, "
    f"else {COMMUNICATION.threshold})",
)
_ALL = click.option(
    "--all", "all_submissions", is_flag=True, help="every submission, not each team's best"
)


def _board(database_url: str | None, storage_dir: Path | None, data_dir: Path | None,
           threshold: float | None, all_submissions: bool) -> Any:  # fmt: skip
    """Read the database and rank every track."""
    from pydantic import ValidationError

    from benchmark.threshold import thresholds_in_force
    from evaluator.core.config import Settings
    from evaluator.core.db import schema_is_current, session_factory
    from leaderboard.board import build_board
    from leaderboard.source import load_rows

    overrides = {"database_url": database_url, "storage_dir": storage_dir, "data_dir": data_dir}
    try:
        settings = Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        raise click.UsageError(f"invalid evaluator settings: {exc.errors()[0]['msg']}") from None
    if settings.db_url.startswith("sqlite:///"):
        path = Path(settings.db_url.split(":///", 1)[1])
        if not path.is_file():
            raise click.UsageError(
                f"no evaluator database at {path}: pass --db URL or --storage DIR of `pflkit serve`"
            )
    try:
        current = schema_is_current(settings.db_url)
    except Exception as exc:  # noqa: BLE001 - any driver error means the same to the user
        raise click.UsageError(f"cannot read {settings.db_url}: {type(exc).__name__}") from None
    if not current:
        raise click.UsageError(
            f"{settings.db_url} is not an evaluator database at the current schema; "
            "start `pflkit serve` once (it migrates) or pass the right --db"
        )
    try:
        thresholds = thresholds_in_force(settings.data_dir)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if threshold is not None:
        thresholds[COMMUNICATION.number] = (threshold, "--threshold")
    with session_factory(settings.db_url)() as session:
        rows = load_rows(session)
    return build_board(rows, thresholds=thresholds, all_submissions=all_submissions)


def _print_table(title: str, entries: list[dict[str, Any]]) -> None:
    """A plain-text table of ranked entries."""
    from leaderboard.formatting import human_bytes, score

    click.echo(f"\n{title}")
    if not entries:
        click.echo("  (no ranked submission)")
        return
    header = f"  {'#':>3}  {'team':<20} {'method':<28} {'ANLS':>7} {'in':>7} {'out':>7} {'acc':>7} {'bytes':>9}  epsilon"
    click.echo(header)
    for e in entries:
        eps = (
            "-"
            if e["epsilon"] is None
            else f"{e['epsilon']:g}" + (" verified" if e["privacy_verified"] else "")
        )
        click.echo(
            f"  {e['rank']:>3}  {e['team'][:20]:<20} {e['method'][:28]:<28} {score(e['anls']):>7} "
            f"{score(e['anls_in']):>7} {score(e['anls_out']):>7} {score(e['accuracy']):>7} "
            f"{human_bytes(e['total_bytes']):>9}  {eps}"
        )


def _print_unranked(entries: list[dict[str, Any]]) -> None:
    """How many rows are not ranked, then each one's team, method and reason."""
    click.echo(f"  not ranked: {len(entries)}")
    for entry in entries:
        click.echo(f"    {entry['team'][:20]:<20} {entry['method'][:28]:<28} {entry['reason']}")


@click.group()
def leaderboard() -> None:
    """Rankings of every track from the evaluator's database (pages: `pflkit serve`, /leaderboard)."""


@leaderboard.command()
@_DB
@_STORAGE
@_DATA
@_THRESHOLD
@_ALL
@click.option("--track", type=click.IntRange(min(TRACKS), max(TRACKS)), default=None, help="one track only")
@click.option("--json", "as_json", is_flag=True, help="print the API's JSON instead of tables")
def show(database_url: str | None, storage_dir: Path | None, data_dir: Path | None,
         threshold: float | None, all_submissions: bool, track: int | None, as_json: bool) -> None:  # fmt: skip
    """Print the leaderboard."""
    from leaderboard.board import as_json as to_json

    board = _board(database_url, storage_dir, data_dir, threshold, all_submissions)
    tracks = [track] if track else sorted(TRACKS)
    if as_json:
        answer = [to_json(board, track=t) for t in tracks]
        click.echo(json.dumps(answer[0] if track else answer, indent=2))
        return
    for number in tracks:
        answer = to_json(board, track=number)
        track = board.tracks[number].track
        if "budgets" in answer:
            for budget, entries in answer["budgets"].items():
                _print_table(
                    f"Track {number}: epsilon <= {budget} (verified claims, highest ANLS)", entries
                )
        elif track.figures or track.ranking not in _SCORE_COLUMNS:
            _print_figures_table(f"Track {number}: {_headline(board, number)}",
                                 _figure_columns(track), answer["ranked"])  # fmt: skip
        else:
            _print_table(f"Track {number}: {_headline(board, number)}", answer["ranked"])
        _print_unranked(answer.get("unranked", []))


def _figure_columns(track: Track) -> list[Figure]:
    """A track's plain-text columns: its ranking figure, then its other board figures."""
    ranking = track.ranking_figure()
    return [ranking, *(f for f in track.board_figures() if f.name != ranking.name)]


def _print_figures_table(title: str, columns: list[Figure], entries: list[dict[str, Any]]) -> None:
    """A plain-text table of ranked entries: their figures, then the total bytes."""
    from leaderboard.formatting import figure_value, human_bytes

    click.echo(f"\n{title}")
    if not entries:
        click.echo("  (no ranked submission)")
        return
    headings = " ".join(f"{figure.short_heading:>7}" for figure in columns)
    click.echo(f"  {'#':>3}  {'team':<20} {'method':<28} {headings} {'bytes':>9}")
    for e in entries:
        cells = " ".join(f"{figure_value(f, e.get(f.name)):>7}" for f in columns)
        click.echo(f"  {e['rank']:>3}  {e['team'][:20]:<20} {e['method'][:28]:<28} {cells} "
                   f"{human_bytes(e['total_bytes']):>9}")  # fmt: skip


def _headline(board: Any, number: int) -> str:
    """What a track without budgets ranks on, for the table's title: its ranking figure's
    better end first, the other figures its table shows, and the threshold."""
    result = board.tracks[number]
    ranking = result.track.ranking_figure()
    headline = (ranking.best_first() if ranking.better is not None
                else f"ranked by {ranking.heading}")  # fmt: skip
    others = [f.heading for f in _figure_columns(result.track)[1:]]
    if result.track.figures and others:
        headline += f" ({', '.join(others)})"
    if result.threshold is not None:
        headline += f" at test ANLS >= {result.threshold:.4f} ({result.threshold_source})"
    return headline


@leaderboard.command()
@_DB
@_STORAGE
@_DATA
@_THRESHOLD
@_ALL
@click.option("--track", type=click.IntRange(min(TRACKS), max(TRACKS)), default=None, help="one track only")
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="CSV file to write",
)
def export(database_url: str | None, storage_dir: Path | None, data_dir: Path | None,
           threshold: float | None, all_submissions: bool, track: int | None, out: Path) -> None:  # fmt: skip
    """Write the leaderboard as CSV (the same columns as GET /api/v1/leaderboard.csv)."""
    import os
    import tempfile

    from leaderboard.board import csv_text, records

    board = _board(database_url, storage_dir, data_dir, threshold, all_submissions)
    text = csv_text(board, track=track)
    out.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    os.close(handle)
    try:
        Path(temporary).write_text(text)
        os.replace(temporary, out)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    click.echo(f"wrote {len(records(board, track=track))} rows to {out}")
