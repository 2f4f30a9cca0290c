"""Ranking rules of the tracks: pure functions over plain rows, no database.

Each track of ``benchmark.tracks`` names the figure it ranks on (``Track.ranking``);
:data:`RANKINGS` maps that figure to the function that ranks the track, and a figure that
declares its better end (``Figure.better``) ranks with :func:`rank_by_figure` when no function
is registered, so a new track is one ``Track`` entry, plus a function registered here with
:func:`ranking` when its rules are its own.

Track 1 (communication efficiency): a finished submission is valid when its test ANLS is at
least the threshold (``>=``: a score exactly at the threshold counts); valid ones are ranked by
the evaluator's total bytes (both directions), fewest first.

Track 2 (provider-level differential privacy): one column per budget epsilon in {1, 4, 8} at
delta <= 1e-5. Only verified claims count. A claim of epsilon e is eligible for every budget
b >= e (``nested=True``, the default): an (e, delta)-DP model is also (b, delta)-DP for b >= e, so
a stronger guarantee never hides a result from a looser column. With ``nested=False`` a claim
counts only in the smallest budget that covers it, the competition's one-submission-per-budget
reading. Columns are ranked by test ANLS, highest first.

Track 3 (personalisation): finished submissions with a mean personalised ANLS (each client's
personalised model on its own test questions, weighted by questions) are ranked by it, highest
first; the global model's unseen-provider ANLS and the total bytes are shown beside it.

Ties (equal bytes, equal ANLS) go to the earlier submission, then to the smaller id so the order
is total and stable. By default each team keeps only its best submission per table.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from benchmark.result_figures import Shown
from benchmark.tracks import COMMUNICATION, PERSONALISATION, PRIVACY, TRACKS, Track, track_figures

BUDGETS: tuple[float, ...] = PRIVACY.budgets
DELTA: float = PRIVACY.delta
REAL_DATA_THRESHOLD: float = COMMUNICATION.threshold


#: the fields of a :class:`Row` before its track figures, in :meth:`Row.as_dict`.
_HEAD = ("id", "team", "track", "method", "family", "status", "created_at", "anls", "anls_in",
         "anls_out", "accuracy", "total_bytes", "official_logger_total_bytes", "epsilon", "delta",
         "privacy_verified")  # fmt: skip
#: the fields of :meth:`Row.as_dict` after the track figures.
_TAIL = ("audit_epsilon", "audit_contradicted", "reproduction")


@dataclass(frozen=True, init=False)
class Row:
    """One submission as the ranking sees it (the evaluator's columns, nothing else).

    Built with keywords: its fields, and any track figure shown on the board
    (``benchmark.tracks.Track.figures``, ``shown="board"``) by name, kept in ``figures`` and
    read as an attribute (``row.personal_anls``; None when the row has no value).

    Attributes:
        id: submission id.
        team: team name.
        track: a ``benchmark.tracks`` number (0 for an upload that never completed).
        method: method name from the metadata.
        family: the checkpoint's model family (``benchmark.model.families``).
        status: evaluator state (``finished``, ``rejected``, ``failed``, ``queued``...).
        created_at: upload time (tie-breaker).
        reason: why a rejected or failed submission ended so.
        anls, anls_in, anls_out, accuracy: test scores.
        total_bytes: the evaluator's tally of the communication log, both directions.
        official_logger_total_bytes: what the official starter kit's logger would have counted
            (declared by the run, not checked, not ranked; the published tables' figure).
        epsilon, delta: the track-2 claim.
        privacy_verified: whether the claim passed ``accountant.verify`` and the log cross-check.
        audit_epsilon: the privacy audit's empirical epsilon lower bound (95% confidence).
        audit_contradicted: the claim's epsilon is below that bound: shown as "contradicted by
            audit" (a statistical test; the claim stays ranked, the organisers decide).
        hidden: hidden by the organisers.
        disqualified_reason: set when the organisers disqualified the submission.
        reproduction: the organisers' re-run of its recipe (``evaluator.reproduction``):
            ``None`` (not selected), ``queued``, ``reproducing`` or the verdict; a submission
            not reproduced (or whose recipe failed) is unranked.
        reproduction_reason: the verdict's sentence (the team's and the organisers').
        figures: its track figures shown on the board, by name (track 3's mean personalised
            ANLS, its spread, the worst client's, the global model's on unseen providers and
            the per-client figures its plot draws).
    """

    id: str
    team: str
    track: int
    method: str
    status: str
    created_at: dt.datetime
    family: str = "vt5"
    reason: str | None = None
    anls: float | None = None
    anls_in: float | None = None
    anls_out: float | None = None
    accuracy: float | None = None
    total_bytes: int | None = None
    official_logger_total_bytes: int | None = None
    epsilon: float | None = None
    delta: float | None = None
    privacy_verified: bool | None = None
    audit_epsilon: float | None = None
    audit_contradicted: bool | None = None
    hidden: bool = False
    disqualified_reason: str | None = None
    reproduction: str | None = None
    reproduction_reason: str | None = None
    figures: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __init__(self, **values: Any) -> None:
        own = _field_defaults()
        extra = {name: value for name, value in values.items()
                 if name not in own and name != "figures"}  # fmt: skip
        unknown = sorted(set(extra) - set(track_figures()))
        if unknown:
            raise TypeError(f"Row has no field or track figure {unknown}")
        for name, default in own.items():
            value = values.get(name, default)
            if value is MISSING:
                raise TypeError(f"Row needs {name!r}")
            object.__setattr__(self, name, value)
        object.__setattr__(self, "figures", {**(values.get("figures") or {}), **extra})

    def __getattr__(self, name: str) -> Any:
        """A track figure by name (None when the row has none); called only for names that
        are not fields."""
        figures = self.__dict__.get("figures") or {}
        if name in figures:
            return figures[name]
        if not name.startswith("_") and name in track_figures():
            return None
        raise AttributeError(f"Row has no field or track figure {name!r}")

    def __getitem__(self, name: str) -> Any:
        """A field or figure by name (templates read ``row[figure]``)."""
        return getattr(self, name)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready view (timestamps as ISO 8601): its fields and every track's scalar
        figures shown on the board (None when the row has none)."""
        data = {name: getattr(self, name) for name in _HEAD}
        data["created_at"] = self.created_at.isoformat()
        for name in board_figure_names():
            data[name] = self.figures.get(name)
        data.update((name, getattr(self, name)) for name in _TAIL)
        return data


@functools.cache
def _field_defaults() -> dict[str, Any]:
    """Each field of :class:`Row` but ``figures``, and its default (``MISSING``: none)."""
    return {spec.name: spec.default for spec in fields(Row) if spec.name != "figures"}


def board_figure_names() -> list[str]:
    """Every track's own scalar figures shown on the board, by track (the exports' columns)."""
    return [figure.name for _, track in sorted(TRACKS.items()) for figure in track.figures
            if figure.shown is Shown.BOARD and figure.scalar]  # fmt: skip


@dataclass(frozen=True)
class Ranked:
    """A ranked submission: its 1-based rank in its table."""

    rank: int
    row: Row


@dataclass(frozen=True)
class Unranked:
    """A submission kept out of a table, with the reason shown next to it."""

    row: Row
    reason: str


@dataclass
class Table:
    """One ranked table and the submissions kept out of it.

    Attributes:
        title: e.g. ``Track 1`` or ``Track 2, epsilon <= 4``.
        ranked: ranked submissions, best first.
        unranked: submissions that do not qualify, with their reasons.
    """

    title: str
    ranked: list[Ranked] = field(default_factory=list)
    unranked: list[Unranked] = field(default_factory=list)


def _tie_key(row: Row) -> tuple[dt.datetime, str]:
    return (row.created_at, row.id)


#: re-run verdicts that keep a submission out of the ranking
NOT_REPRODUCED = ("not reproduced", "failed")


def exclusion_reason(row: Row) -> str | None:
    """Why a submission cannot be ranked on either track, or None when it may be.

    Args:
        row: the submission.

    Returns:
        A short reason (hidden, disqualified, not finished, rejected, failed, no score).
    """
    if row.hidden:
        return "hidden by the organisers"
    if row.disqualified_reason:
        return f"disqualified: {row.disqualified_reason}"
    if row.reproduction in NOT_REPRODUCED:
        return f"not reproduced: {row.reproduction_reason or row.reproduction}"
    if row.status == "rejected":
        return f"rejected: {row.reason}" if row.reason else "rejected"
    if row.status == "failed":
        return f"failed: {row.reason}" if row.reason else "failed (scoring error)"
    if row.status != "finished":
        return f"not scored yet ({row.status})"
    if row.anls is None:
        return "no test score"
    return None


def _best_per_team(ranked_rows: list[Row]) -> list[Row]:
    """Keep each team's first row of an already ordered list."""
    seen: set[str] = set()
    kept = []
    for row in ranked_rows:
        if row.team not in seen:
            seen.add(row.team)
            kept.append(row)
    return kept


def _numbered(rows: list[Row]) -> list[Ranked]:
    return [Ranked(rank=i + 1, row=row) for i, row in enumerate(rows)]


def rank_track1(
    rows: Iterable[Row],
    *,
    threshold: float,
    all_submissions: bool = False,
    track: Track = COMMUNICATION,
) -> Table:
    """Rank track-1 submissions by total bytes among those reaching the ANLS threshold.

    Args:
        rows: submissions of any track (other tracks are ignored).
        threshold: test ANLS a submission must reach (inclusive).
        all_submissions: rank every valid submission instead of each team's best.
        track: the track ranked this way (its number selects the rows, its name titles the
            table).

    Returns:
        The track-1 table.

    Raises:
        ValueError: a threshold outside [0, 1].
    """
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"the track-1 threshold is an ANLS in [0, 1], got {threshold}")

    def reason(row: Row) -> str | None:
        if row.total_bytes is None:
            return "no communication tally"
        if row.anls is not None and row.anls < threshold:
            return f"ANLS {row.anls:.4f} below the threshold {threshold:.4f}"
        return None

    return _one_table(rows, track, reason, lambda r: r.total_bytes, all_submissions)


def _one_table(rows: Iterable[Row], track: Track, reason_of: Callable[[Row], str | None],
               figure: Callable[[Row], float], all_submissions: bool) -> Table:  # fmt: skip
    """A track's single table: its rows that pass :func:`exclusion_reason` and ``reason_of``,
    ordered by ``figure`` (smallest first), ties to the earlier submission.

    Args:
        rows: submissions of any track (other tracks are ignored).
        track: the track (its number selects the rows, its name titles the table).
        reason_of: the track's own reason a row cannot be ranked, or None.
        figure: what the rows are ordered on.
        all_submissions: rank every valid submission instead of each team's best.

    Returns:
        The table with its unranked rows.
    """
    table = Table(title=f"Track {track.number}: {track.name}")
    valid: list[Row] = []
    for row in rows:
        if row.track != track.number:
            continue
        reason = exclusion_reason(row) or reason_of(row)
        if reason is None:
            valid.append(row)
        else:
            table.unranked.append(Unranked(row=row, reason=reason))
    table.ranked = _numbered(_ordered(valid, lambda r: (figure(r), *_tie_key(r)), all_submissions))
    table.unranked.sort(key=lambda u: _tie_key(u.row))
    return table


def _ordered(rows: list[Row], key: Callable[[Row], Any], all_submissions: bool) -> list[Row]:
    """``rows`` ordered by ``key`` (unique per row), or only each team's first in that order.

    Each team's first is its smallest key, so the best-per-team table sorts one row per team
    rather than every valid row (10,000 submissions, 50 teams: 50 rows, not thousands).
    """
    if all_submissions:
        return sorted(rows, key=key)
    best: dict[str, tuple[Any, Row]] = {}
    for row in rows:
        mine = key(row)
        held = best.get(row.team)
        if held is None or mine < held[0]:
            best[row.team] = (mine, row)
    return [row for _, row in sorted(best.values(), key=lambda pair: pair[0])]


def budget_of(epsilon: float, budgets: Sequence[float] = BUDGETS) -> float | None:
    """The smallest budget that covers ``epsilon`` (None when it exceeds every budget)."""
    for budget in sorted(budgets):
        if epsilon <= budget:
            return budget
    return None


def rank_track2(
    rows: Iterable[Row],
    *,
    budgets: Sequence[float] = BUDGETS,
    delta: float = DELTA,
    nested: bool = True,
    all_submissions: bool = False,
    track: Track = PRIVACY,
) -> tuple[dict[float, Table], list[Unranked]]:
    """Rank track-2 submissions by test ANLS within each privacy budget.

    Args:
        rows: submissions of any track (other tracks are ignored).
        budgets: the epsilon budgets, one column each.
        delta: the largest delta a claim may have.
        nested: a claim counts in every budget at or above its epsilon (True) or only in the
            smallest budget that covers it (False).
        all_submissions: rank every eligible submission instead of each team's best per column.
        track: the track ranked this way (its number selects the rows and titles the tables).

    Returns:
        One table per budget (their ``unranked`` lists stay empty) and the submissions that
        qualify for no column, with reasons.
    """
    tables = {b: Table(title=f"Track {track.number}: epsilon <= {b:g}") for b in sorted(budgets)}
    eligible: list[tuple[Row, float]] = []
    unranked: list[Unranked] = []
    for row in rows:
        if row.track != track.number:
            continue
        reason = exclusion_reason(row)
        if reason is None and row.epsilon is None:
            reason = "no privacy claim"
        if reason is None and not row.privacy_verified:
            reason = f"privacy claim epsilon {row.epsilon:g} not verified"
        if reason is None and row.delta is not None and row.delta > delta:
            reason = f"delta {row.delta:g} above {delta:g}"
        smallest = budget_of(row.epsilon, budgets) if reason is None else None
        if reason is None and smallest is None:
            reason = f"epsilon {row.epsilon:g} above every budget ({max(budgets):g})"
        if reason is not None:
            unranked.append(Unranked(row=row, reason=reason))
            continue
        eligible.append((row, smallest))
    # One sort for every column: a column's order is the order of its rows among all of them.
    eligible.sort(key=lambda pair: (-pair[0].anls, *_tie_key(pair[0])))
    for budget, table in tables.items():
        ordered = [r for r, least in eligible if budget == least or (nested and budget > least)]
        table.ranked = _numbered(ordered if all_submissions else _best_per_team(ordered))
    unranked.sort(key=lambda u: _tie_key(u.row))
    return tables, unranked


def rank_track3(
    rows: Iterable[Row], *, all_submissions: bool = False, track: Track = PERSONALISATION
) -> Table:
    """Rank track-3 submissions by mean personalised ANLS, highest first.

    Args:
        rows: submissions of any track (other tracks are ignored).
        all_submissions: rank every valid submission instead of each team's best.
        track: the track ranked this way (its number selects the rows, its name titles the
            table).

    Returns:
        The track-3 table.
    """
    return _one_table(
        rows, track, lambda r: "no personalised score" if r.personal_anls is None else None,
        lambda r: -r.personal_anls, all_submissions,
    )  # fmt: skip


@dataclass
class TrackResult:
    """One track's rankings.

    Attributes:
        track: the track.
        tables: one table per epsilon budget, or ``{None: table}`` for a track without budgets.
        unranked: the track's submissions that qualify for no table, with reasons.
        threshold: the ANLS threshold in force (``None``: the track has none).
        threshold_source: where the threshold came from (a ``benchmark.json`` path or
            ``setting``).
    """

    track: Track
    tables: dict[float | None, Table]
    unranked: list[Unranked]
    threshold: float | None = None
    threshold_source: str = "setting"


#: ranks one track's rows: ``(rows, track, threshold, all_submissions) -> TrackResult``.
RankingFunction = Callable[[Sequence[Row], Track, "float | None", bool], TrackResult]

#: ``Track.ranking`` -> the function that ranks a track on that figure.
RANKINGS: dict[str, RankingFunction] = {}


def ranking(figure: str) -> Callable[[RankingFunction], RankingFunction]:
    """Register the ranking function of the tracks that rank on ``figure``."""

    def register(function: RankingFunction) -> RankingFunction:
        RANKINGS[figure] = function
        return function

    return register


@ranking("total_bytes")
def rank_by_bytes(rows: Sequence[Row], track: Track, threshold: float | None,
                  all_submissions: bool) -> TrackResult:  # fmt: skip
    """Fewest bytes first among the submissions that reach the track's ANLS threshold."""
    threshold = track.threshold if threshold is None else threshold
    table = rank_track1(rows, threshold=threshold, all_submissions=all_submissions, track=track)
    return TrackResult(track, {None: table}, table.unranked, threshold)


@ranking("anls")
def rank_by_anls_per_budget(rows: Sequence[Row], track: Track, threshold: float | None,
                            all_submissions: bool) -> TrackResult:  # fmt: skip
    """Highest ANLS first within each epsilon budget, verified privacy claims only."""
    tables, unranked = rank_track2(
        rows, budgets=track.budgets, delta=track.delta, all_submissions=all_submissions,
        track=track,
    )  # fmt: skip
    return TrackResult(track, dict(tables), unranked, threshold)


@ranking("personal_anls")
def rank_by_personal_anls(rows: Sequence[Row], track: Track, threshold: float | None,
                          all_submissions: bool) -> TrackResult:  # fmt: skip
    """Highest mean personalised ANLS first (track 3)."""
    table = rank_track3(rows, all_submissions=all_submissions, track=track)
    return TrackResult(track, {None: table}, table.unranked, threshold)


def rank_by_figure(rows: Sequence[Row], track: Track, threshold: float | None,
                   all_submissions: bool) -> TrackResult:  # fmt: skip
    """The ranking of a track whose ranking figure declares a direction and that has no
    function of its own: that figure, its better end first (``Figure.better``), among the
    submissions that have it and reach the track's ANLS threshold when it has one."""
    figure = track.ranking_figure()
    threshold = track.threshold if threshold is None else threshold
    sign = -1 if figure.better == "higher" else 1

    def reason(row: Row) -> str | None:
        if getattr(row, figure.name) is None:
            return f"no {figure.heading}"
        if threshold is not None and row.anls < threshold:
            return f"ANLS {row.anls:.4f} below the threshold {threshold:.4f}"
        return None

    table = _one_table(rows, track, reason, lambda r: sign * getattr(r, figure.name),
                       all_submissions)  # fmt: skip
    return TrackResult(track, {None: table}, table.unranked, threshold)


def ranking_function(track: Track) -> RankingFunction:
    """The function that ranks a track: the one registered for its ranking figure, else
    :func:`rank_by_figure` for a figure that declares a direction and a track without budgets.

    Raises:
        LookupError: neither applies.
    """
    if track.ranking in RANKINGS:
        return RANKINGS[track.ranking]
    if track.ranking_figure().better is not None and not track.budgets:
        return rank_by_figure
    raise LookupError(
        f"track {track.number} ranks on {track.ranking!r}, which has no ranking function; "
        f"register one with leaderboard.ranking.ranking({track.ranking!r}), or declare the "
        "figure's better end (Figure.better) for a track without budgets"
    )


def rank_track(rows: Sequence[Row], track: Track, *, threshold: float | None = None,
               all_submissions: bool = False) -> TrackResult:  # fmt: skip
    """Rank one track with its ranking function (:func:`ranking_function`).

    Args:
        rows: submissions of any track (other tracks are ignored).
        track: the track.
        threshold: the ANLS threshold in force (``None``: the track's own).
        all_submissions: rank every valid submission instead of each team's best.

    Returns:
        The track's tables and unranked submissions.

    Raises:
        LookupError: no function ranks the track's ranking figure.
    """
    return ranking_function(track)(rows, track, threshold, all_submissions)
