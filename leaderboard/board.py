"""Both tracks' tables from one list of rows, and their flat records for JSON and CSV (pure)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from leaderboard.ranking import BUDGETS, Row, Table, Unranked, rank_track1, rank_track2

# Scores are published with as many decimals as the competition did; more would let repeated
# submissions probe individual hidden answers. Organisers see full precision.
PUBLIC_DECIMALS = 4
SCORE_FIELDS = ("anls", "anls_in", "anls_out", "accuracy")
INTEGER_COLUMNS = ("track", "rank", "total_bytes")
# OWASP CSV injection: a cell starting with one of these is run as a formula by spreadsheets.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")

# Columns of the CSV export (web and command line).
CSV_COLUMNS = [
    "track", "budget", "rank", "team", "method", "anls", "anls_in", "anls_out", "accuracy",
    "total_bytes", "epsilon", "delta", "privacy_verified", "created_at", "status", "reason", "id",
]  # fmt: skip


@dataclass
class Board:
    """Everything the leaderboard shows.

    Attributes:
        threshold: the track-1 ANLS threshold in force.
        threshold_source: where it came from (a ``benchmark.json`` path or ``setting``).
        track1: the track-1 table (with its unranked submissions).
        track2: one table per epsilon budget.
        track2_unranked: track-2 submissions that qualify for no budget.
        all_submissions: whether every submission is ranked, not only each team's best.
        public: the participants' view: scores to ``PUBLIC_DECIMALS`` decimals, no rejection or
            failure reasons, no scores of hidden submissions.
    """

    threshold: float
    threshold_source: str
    track1: Table
    track2: dict[float, Table]
    track2_unranked: list[Unranked]
    all_submissions: bool = False
    public: bool = True


def _public(unranked: Unranked) -> Unranked:
    """A hidden submission shows only who, what, when and why, never its scores; a rejected
    or failed one shows its state, not the reason (that is its team's and the organisers')."""
    if unranked.reason.startswith(("rejected:", "failed:")):
        unranked = dataclasses.replace(unranked, reason=unranked.row.status)
    if not unranked.row.hidden:
        return unranked
    row = unranked.row
    stripped = Row(
        id=row.id,
        team=row.team,
        track=row.track,
        method=row.method,
        status=row.status,
        created_at=row.created_at,
        hidden=True,
    )
    return dataclasses.replace(unranked, row=stripped)


def build_board(
    rows: Sequence[Row],
    *,
    threshold: float,
    threshold_source: str = "setting",
    all_submissions: bool = False,
    budgets: Sequence[float] = BUDGETS,
    public: bool = True,
) -> Board:
    """Rank both tracks.

    Args:
        rows: every submission.
        threshold: the track-1 ANLS threshold.
        threshold_source: where the threshold came from, shown on the page.
        all_submissions: rank every submission rather than each team's best.
        budgets: the track-2 epsilon budgets.
        public: strip the scores of hidden submissions (the participants' view).

    Returns:
        The board.
    """
    track1 = rank_track1(rows, threshold=threshold, all_submissions=all_submissions)
    track2, unranked2 = rank_track2(rows, budgets=budgets, all_submissions=all_submissions)
    if public:
        track1.unranked = [_public(u) for u in track1.unranked]
        unranked2 = [_public(u) for u in unranked2]
    return Board(threshold, threshold_source, track1, track2, unranked2, all_submissions, public)


def records(board: Board, *, track: int | None = None) -> list[dict[str, Any]]:
    """One flat record per table entry: ranked ones with their rank, then the unranked.

    Args:
        board: the board.
        track: 1 or 2 for one track only.

    Returns:
        Dicts with ``track``, ``budget`` (track 2), ``rank`` (None when unranked), ``reason`` and
        the row's fields.
    """
    out: list[dict[str, Any]] = []
    if track in (None, 1):
        for entry in board.track1.ranked:
            out.append(
                {
                    "track": 1,
                    "budget": None,
                    "rank": entry.rank,
                    "reason": None,
                    **row_dict(board, entry.row),
                }
            )
        for item in board.track1.unranked:
            out.append(
                {
                    "track": 1,
                    "budget": None,
                    "rank": None,
                    "reason": item.reason,
                    **row_dict(board, item.row),
                }
            )
    if track in (None, 2):
        for budget, table in board.track2.items():
            for entry in table.ranked:
                out.append(
                    {
                        "track": 2,
                        "budget": budget,
                        "rank": entry.rank,
                        "reason": None,
                        **row_dict(board, entry.row),
                    }
                )
        for item in board.track2_unranked:
            out.append(
                {
                    "track": 2,
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
        track: 1 or 2.

    Returns:
        Track 1: ``threshold``, ``ranked``, ``unranked``; track 2: ``budgets`` (``"1"``, ``"4"``,
        ``"8"`` -> ranked lists), the same entries flat in ``ranked`` (each with its ``budget``)
        and ``unranked``.

    Raises:
        ValueError: a track other than 1 or 2.
    """

    def ranked(table: Table) -> list[dict[str, Any]]:
        return [{"rank": e.rank, **row_dict(board, e.row)} for e in table.ranked]

    def unranked(items: list[Unranked]) -> list[dict[str, Any]]:
        return [{**row_dict(board, u.row), "reason": u.reason} for u in items]

    common = {"track": track, "all_submissions": board.all_submissions}
    if track == 1:
        return {
            **common,
            "threshold": board.threshold,
            "threshold_source": board.threshold_source,
            "ranked": ranked(board.track1),
            "unranked": unranked(board.track1.unranked),
        }
    if track == 2:
        return {
            **common,
            "delta": 1e-5,
            "budgets": {f"{b:g}": ranked(t) for b, t in board.track2.items()},
            "ranked": [
                {"budget": b, **entry} for b, t in board.track2.items() for entry in ranked(t)
            ],
            "unranked": unranked(board.track2_unranked),
        }
    raise ValueError(f"track must be 1 or 2, got {track}")


def row_dict(board: Board, row: Row) -> dict[str, Any]:
    """A row as the board publishes it: scores rounded in the public view.

    Args:
        board: the board (its ``public`` flag decides the precision).
        row: the row.

    Returns:
        ``row.as_dict()`` with the scores rounded to ``PUBLIC_DECIMALS`` when public.
    """
    data = row.as_dict()
    if board.public:
        for name in SCORE_FIELDS:
            if data.get(name) is not None:
                data[name] = round(data[name], PUBLIC_DECIMALS)
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
        track: 1 or 2 for one track only.

    Returns:
        The CSV text with the ``CSV_COLUMNS`` header.
    """
    import pandas as pd

    rows = [{k: neutralise_cell(v) for k, v in r.items()} for r in records(board, track=track)]
    frame = pd.DataFrame.from_records(rows, columns=CSV_COLUMNS)
    for column in INTEGER_COLUMNS:
        frame[column] = frame[column].astype("Int64")
    return frame.to_csv(index=False)
