"""Every track's tables from one list of rows, and their flat records for JSON and CSV (pure)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchmark.result_figures import SHARED_FIGURES, Figure
from benchmark.tracks import COMMUNICATION, TRACKS, track_figures
from leaderboard.ranking import Row, Table, TrackResult, Unranked, rank_track

# OWASP CSV injection: a cell starting with one of these is run as a formula by spreadsheets.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")

# Columns of the CSV export (web and command line): these, each track's board figures
# (``Track.board_figures``), then :data:`CSV_LAST_COLUMNS`.
CSV_FIRST_COLUMNS = ("track", "budget", "rank", "team", "method", "family", "anls", "anls_in",
                     "anls_out", "accuracy", "total_bytes",
                     "official_logger_total_bytes")  # fmt: skip
CSV_LAST_COLUMNS = ("created_at", "status", "reason", "id")


@dataclass
class Board:
    """Everything the leaderboard shows.

    Attributes:
        thresholds: each thresholded track's ANLS threshold in force and where it came from
            (a ``benchmark.json`` path or ``setting``), by track number.
        tracks: track number -> that track's rankings, for every track of ``benchmark.tracks``.
        all_submissions: whether every submission is ranked, not only each team's best.
        public: the participants' view: figures rounded as declared (``Figure.decimals``), no
            rejection or failure reasons, no scores of hidden submissions.
    """

    thresholds: dict[int, tuple[float, str]]
    tracks: dict[int, TrackResult]
    all_submissions: bool = False
    public: bool = True

    def table(self, number: int) -> Table:
        """The single table of a track without budgets (with its unranked submissions).

        Raises:
            KeyError: a track the board lacks, or one ranked in several tables.
        """
        tables = self.tracks[number].tables
        if None not in tables:
            raise KeyError(f"track {number} has one table per budget: read board.tracks")
        return tables[None]


def csv_columns() -> list[str]:
    """The CSV export's header: the shared columns, then each track's board figures."""
    own = [figure.name for track in TRACKS.values() for figure in track.board_figures()]
    return list(dict.fromkeys([*CSV_FIRST_COLUMNS, *own, *CSV_LAST_COLUMNS]))


def integer_columns() -> list[str]:
    """The CSV columns that hold integers (``Int64``, so a missing value keeps them integer):
    ``track``, ``rank`` and the integer figures."""
    figures = _declared()
    return ["track", "rank", *(name for name in csv_columns()
                               if name in figures and figures[name].kind == "int")]  # fmt: skip


def _declared() -> dict[str, Figure]:
    """Every figure by name: the shared ones and every track's."""
    return {**{figure.name: figure for figure in SHARED_FIGURES}, **track_figures()}


def _public(unranked: Unranked) -> Unranked:
    """A hidden submission shows only who, what, when and why, never its scores; a rejected
    or failed one shows its state, not the reason (that is its team's and the organisers')."""
    if unranked.reason.startswith(("rejected:", "failed:")):
        unranked = dataclasses.replace(unranked, reason=unranked.row.status)
    if unranked.reason.startswith("not reproduced:"):
        unranked = dataclasses.replace(unranked, reason="not reproduced")
    if not unranked.row.hidden:
        return unranked
    row = unranked.row
    stripped = Row(
        id=row.id,
        team=row.team,
        track=row.track,
        method=row.method,
        family=row.family,
        status=row.status,
        created_at=row.created_at,
        hidden=True,
    )
    return dataclasses.replace(unranked, row=stripped)


def build_board(
    rows: Sequence[Row],
    *,
    threshold: float | None = None,
    threshold_source: str = "setting",
    thresholds: Mapping[int, tuple[float, str]] | None = None,
    all_submissions: bool = False,
    public: bool = True,
) -> Board:
    """Rank every track of ``benchmark.tracks``, each with its registered ranking function.

    Args:
        rows: every submission.
        threshold: track 1's ANLS threshold in force (a shorthand for ``thresholds``).
        threshold_source: where it came from, shown on the page.
        thresholds: each thresholded track's ``(threshold, source)`` by number
            (``benchmark.threshold.thresholds_in_force``); a track left out ranks with its own
            ``Track.threshold``.
        all_submissions: rank every submission rather than each team's best.
        public: strip the scores of hidden submissions (the participants' view).

    Returns:
        The board.
    """
    in_force = dict(thresholds or {})
    if threshold is not None:
        in_force[COMMUNICATION.number] = (threshold, threshold_source)
    results: dict[int, TrackResult] = {}
    for number, track in TRACKS.items():
        value, source = in_force.get(number, (None, "setting"))
        result = rank_track(rows, track, threshold=value, all_submissions=all_submissions)
        if number in in_force:
            result.threshold_source = source
        if public:
            original, result.unranked = result.unranked, [_public(u) for u in result.unranked]
            for table in result.tables.values():  # a single table shares the track's list
                table.unranked = (
                    result.unranked
                    if table.unranked is original
                    else [_public(u) for u in table.unranked]
                )
        results[number] = result
    kept = {number: (r.threshold, r.threshold_source) for number, r in results.items()
            if r.threshold is not None}  # fmt: skip
    return Board(kept, results, all_submissions, public)


def records(board: Board, *, track: int | None = None) -> list[dict[str, Any]]:
    """One flat record per table entry: per track, ranked ones with their rank, then the unranked.

    Args:
        board: the board.
        track: a track number for that track only.

    Returns:
        Dicts with ``track``, ``budget`` (tracks with budgets), ``rank`` (None when unranked),
        ``reason`` and the row's fields.
    """
    out: list[dict[str, Any]] = []
    for number, result in board.tracks.items():
        if track not in (None, number):
            continue
        for budget, table in result.tables.items():
            for entry in table.ranked:
                out.append(
                    {
                        "track": number,
                        "budget": budget,
                        "rank": entry.rank,
                        "reason": None,
                        **row_dict(board, entry.row),
                    }
                )
        for item in result.unranked:
            out.append(
                {
                    "track": number,
                    "budget": None,
                    "rank": None,
                    "reason": item.reason,
                    **row_dict(board, item.row),
                }
            )
    return out


def as_json(board: Board, *, track: int) -> dict[str, Any]:
    """The JSON answer of ``GET /api/v1/leaderboard?track=N``.

    Args:
        board: the board.
        track: a track number.

    Returns:
        ``track``, ``all_submissions``; ``threshold`` and ``threshold_source`` for a track with a
        threshold; ``delta`` for a privacy track; ``budgets`` (``"1"``, ``"4"``, ``"8"`` ->
        ranked lists) for a track with budgets, whose flat ``ranked`` entries carry their
        ``budget``; ``ranked`` and ``unranked``.

    Raises:
        ValueError: a track the benchmark does not have.
    """

    def ranked(table: Table) -> list[dict[str, Any]]:
        return [{"rank": e.rank, **row_dict(board, e.row)} for e in table.ranked]

    if track not in board.tracks:
        raise ValueError(f"track must be one of {sorted(board.tracks)}, got {track}")
    result = board.tracks[track]
    answer: dict[str, Any] = {"track": track, "all_submissions": board.all_submissions}
    if result.threshold is not None:
        answer["threshold"] = result.threshold
        answer["threshold_source"] = result.threshold_source
    if result.track.delta is not None:
        answer["delta"] = result.track.delta
    if result.track.budgets:
        answer["budgets"] = {f"{b:g}": ranked(t) for b, t in result.tables.items()}
        answer["ranked"] = [
            {"budget": b, **entry} for b, t in result.tables.items() for entry in ranked(t)
        ]
    else:
        answer["ranked"] = [entry for t in result.tables.values() for entry in ranked(t)]
    answer["unranked"] = [{**row_dict(board, u.row), "reason": u.reason} for u in result.unranked]
    return answer


def row_dict(board: Board, row: Row) -> dict[str, Any]:
    """A row as the board publishes it: figures rounded in the public view.

    Args:
        board: the board (its ``public`` flag decides the precision).
        row: the row.

    Returns:
        ``row.as_dict()`` with each figure rounded as declared (``Figure.published``) when
        public.
    """
    data = row.as_dict()
    if board.public:
        for name, figure in _declared().items():
            if name in data:
                data[name] = figure.published(data[name])
    return data


def neutralise_cell(value: Any) -> Any:
    """A text cell that a spreadsheet would run as a formula, prefixed with ``'`` (OWASP)."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_text(board: Board, *, track: int | None = None) -> str:
    """The board as CSV (web export and ``pflkit leaderboard export``).

    Text cells that start with ``=``, ``+``, ``-``, ``@``, tab or carriage return are prefixed
    with ``'`` so spreadsheets show them as text; integer columns stay integers.

    Args:
        board: the board.
        track: a track number for that track only.

    Returns:
        The CSV text with the :func:`csv_columns` header.
    """
    import pandas as pd

    rows = [{k: neutralise_cell(v) for k, v in r.items()} for r in records(board, track=track)]
    frame = pd.DataFrame.from_records(rows, columns=csv_columns())
    for column in integer_columns():
        frame[column] = frame[column].astype("Int64")
    return frame.to_csv(index=False)
