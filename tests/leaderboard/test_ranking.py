"""Ranking rules of every track on small hand-made tables."""

from __future__ import annotations

import datetime as dt

import pytest

from leaderboard.board import as_json, build_board, csv_text, records
from leaderboard.ranking import Row, budget_of, rank_track1, rank_track2, rank_track3

T0 = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)


def row(id: str, team: str, *, minute: int = 0, track: int = 1, **kw) -> Row:
    base = {"method": f"m-{id}", "status": "finished", "anls": 0.9, "total_bytes": 1000}
    return Row(
        id=id,
        team=team,
        track=track,
        created_at=T0 + dt.timedelta(minutes=minute),
        **{**base, **kw},
    )


def ids(table) -> list[str]:
    return [e.row.id for e in table.ranked]


def reasons(items) -> dict[str, str]:
    return {u.row.id: u.reason for u in items}


def test_track1_fewest_bytes_first_among_valid():
    rows = [
        row("a", "A", total_bytes=5000),
        row("b", "B", total_bytes=300),
        row("c", "C", total_bytes=40_000),
    ]
    table = rank_track1(rows, threshold=0.8)
    assert ids(table) == ["b", "a", "c"]
    assert [e.rank for e in table.ranked] == [1, 2, 3]


def test_track1_threshold_is_inclusive():
    rows = [
        row("at", "A", anls=0.8242, total_bytes=900),
        row("below", "B", anls=0.82419999, total_bytes=10),
        row("above", "C", anls=0.9, total_bytes=950),
    ]
    table = rank_track1(rows, threshold=0.8242)
    assert ids(table) == ["at", "above"]
    assert reasons(table.unranked) == {"below": "ANLS 0.8242 below the threshold 0.8242"}


def test_track1_equal_bytes_go_to_the_earlier_submission():
    rows = [
        row("late", "A", minute=5, total_bytes=100),
        row("early", "B", minute=1, total_bytes=100),
    ]
    assert ids(rank_track1(rows, threshold=0.5)) == ["early", "late"]
    # Same bytes and same time: the id decides, so the order never depends on input order.
    same = [row("z", "A", total_bytes=7), row("y", "B", total_bytes=7)]
    assert (
        ids(rank_track1(same, threshold=0.5))
        == ids(rank_track1(same[::-1], threshold=0.5))
        == ["y", "z"]
    )


def test_track1_best_per_team_by_default_all_on_request():
    rows = [
        row("a1", "A", total_bytes=900, minute=0),
        row("a2", "A", total_bytes=100, minute=1),
        row("a3", "A", total_bytes=100, minute=2),
        row("a4", "A", total_bytes=10, anls=0.1, minute=3),
        row("b1", "B", total_bytes=500),
    ]
    assert ids(rank_track1(rows, threshold=0.8)) == ["a2", "b1"]
    assert ids(rank_track1(rows, threshold=0.8, all_submissions=True)) == ["a2", "a3", "b1", "a1"]
    # The team's cheaper run below the threshold never counts as its best.
    assert "a4" in reasons(rank_track1(rows, threshold=0.8).unranked)


def test_track1_hidden_disqualified_rejected_failed_pending_are_unranked_with_reasons():
    rows = [
        row("ok", "A"),
        row("hid", "B", hidden=True, total_bytes=1),
        row("dq", "C", disqualified_reason="trained on test data", total_bytes=1),
        row(
            "rej", "D", status="rejected", reason="model: wrong shape", anls=None, total_bytes=None
        ),
        row("fail", "E", status="failed", anls=None, total_bytes=None),
        row("wait", "F", status="queued", anls=None, total_bytes=None),
        row("t2", "G", track=2),
    ]
    table = rank_track1(rows, threshold=0.8)
    assert ids(table) == ["ok"]
    assert reasons(table.unranked) == {
        "hid": "hidden by the organisers",
        "dq": "disqualified: trained on test data",
        "rej": "rejected: model: wrong shape",
        "fail": "failed (scoring error)",
        "wait": "not scored yet (queued)",
    }


def test_track1_rejects_a_threshold_that_is_not_an_anls():
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        rank_track1([], threshold=82.42)


def t2(id: str, team: str, eps: float, anls: float, *, minute: int = 0, **kw) -> Row:
    claim = {"epsilon": eps, "delta": 1e-5, "privacy_verified": True, "anls": anls}
    return row(id, team, track=2, minute=minute, **{**claim, **kw})


def test_budget_of_covers_with_the_smallest_budget():
    assert [budget_of(e) for e in (0.5, 1.0, 1.0057, 4.0, 7.9, 8.0, 8.0039)] == [
        1,
        1,
        4,
        4,
        8,
        8,
        None,
    ]


def test_track2_nested_budgets_rank_by_anls_highest_first():
    rows = [
        t2("e1", "A", 1.0, 0.58),
        t2("e4", "B", 4.0, 0.61),
        t2("e8", "C", 8.0, 0.62),
        t2("e05", "D", 0.5, 0.50),
    ]
    tables, unranked = rank_track2(rows)
    assert ids(tables[1.0]) == ["e1", "e05"]
    assert ids(tables[4.0]) == ["e4", "e1", "e05"]
    assert ids(tables[8.0]) == ["e8", "e4", "e1", "e05"]
    assert unranked == []
    own, _ = rank_track2(rows, nested=False)
    assert [ids(own[b]) for b in (1.0, 4.0, 8.0)] == [["e1", "e05"], ["e4"], ["e8"]]


def test_track2_only_verified_claims_within_budget_and_delta_count():
    rows = [
        t2("ok", "A", 4.0, 0.6),
        t2("unverified", "B", 1.0, 0.9, privacy_verified=False),
        t2("over", "C", 8.0039, 0.9),
        t2("delta", "D", 1.0, 0.9, delta=1e-4),
        row("noclaim", "E", track=2),
        t2("hidden", "F", 1.0, 0.99, hidden=True),
    ]
    tables, unranked = rank_track2(rows)
    assert ids(tables[1.0]) == []
    assert ids(tables[8.0]) == ["ok"]
    assert reasons(unranked) == {
        "unverified": "privacy claim epsilon 1 not verified",
        "over": "epsilon 8.0039 above every budget (8)",
        "delta": "delta 0.0001 above 1e-05",
        "noclaim": "no privacy claim",
        "hidden": "hidden by the organisers",
    }


def test_track2_ties_and_best_per_team_per_column():
    rows = [
        t2("a-late", "A", 1.0, 0.6, minute=9),
        t2("b-early", "B", 1.0, 0.6, minute=1),
        t2("a-eps4", "A", 4.0, 0.7, minute=2),
    ]
    tables, _ = rank_track2(rows)
    assert ids(tables[1.0]) == ["b-early", "a-late"]
    # Team A's best differs per column: its eps-4 run tops column 4, its eps-1 run column 1.
    assert ids(tables[4.0]) == ["a-eps4", "b-early"]
    assert ids(rank_track2(rows, all_submissions=True)[0][4.0]) == ["a-eps4", "b-early", "a-late"]


def test_board_hides_the_scores_of_hidden_submissions_and_exports_flat_records():
    rows = [
        row("a", "A"),
        row("h", "B", hidden=True, anls=0.99, total_bytes=5),
        t2("p", "C", 1.0, 0.5),
    ]
    board = build_board(rows, threshold=0.8)
    hidden = board.table(1).unranked[0].row
    assert (hidden.id, hidden.anls, hidden.total_bytes) == ("h", None, None)
    assert build_board(rows, threshold=0.8, public=False).table(1).unranked[0].row.anls == 0.99
    flat = records(board)
    assert [(r["track"], r["budget"], r["rank"], r["id"]) for r in flat] == [
        (1, None, 1, "a"),
        (1, None, None, "h"),
        (2, 1.0, 1, "p"),
        (2, 4.0, 1, "p"),
        (2, 8.0, 1, "p"),
    ]
    assert as_json(board, track=2)["budgets"]["4"][0]["id"] == "p"
    with pytest.raises(ValueError):
        as_json(board, track=4)


def t3(id: str, team: str, personal: float | None, *, minute: int = 0, **kw) -> Row:
    figures = {"personal_anls": personal, "personal_anls_std": 0.05, "personal_worst_anls": 0.2,
               "global_unseen_anls": 0.3, "anls": 0.4, "total_bytes": 5000}  # fmt: skip
    return row(id, team, track=3, minute=minute, **{**figures, **kw})


def test_track3_highest_mean_personalised_anls_first():
    rows = [
        t3("a", "A", 0.51),
        t3("b", "B", 0.63, anls=0.1),  # the global ANLS does not rank track 3
        t3("c", "C", 0.47, total_bytes=10),  # nor do the bytes
        row("t1", "D", anls=0.99),
    ]
    table = rank_track3(rows)
    assert ids(table) == ["b", "a", "c"] and [e.rank for e in table.ranked] == [1, 2, 3]
    assert table.unranked == []


def test_track3_ties_go_to_the_earlier_submission_then_the_id():
    rows = [t3("late", "A", 0.5, minute=5), t3("early", "B", 0.5, minute=1)]
    assert ids(rank_track3(rows)) == ["early", "late"]
    same = [t3("z", "A", 0.5), t3("y", "B", 0.5)]
    assert ids(rank_track3(same)) == ids(rank_track3(same[::-1])) == ["y", "z"]


def test_track3_best_per_team_and_unranked_with_reasons():
    rows = [
        t3("a1", "A", 0.40, minute=0),
        t3("a2", "A", 0.55, minute=1),
        t3("b1", "B", 0.50),
        t3("noscore", "C", None),
        t3("hid", "D", 0.9, hidden=True),
        t3("rej", "E", None, status="rejected", reason="personal: NaN", anls=None),
        t3("wait", "F", None, status="queued", anls=None),
    ]
    assert ids(rank_track3(rows)) == ["a2", "b1"]
    assert ids(rank_track3(rows, all_submissions=True)) == ["a2", "b1", "a1"]
    assert reasons(rank_track3(rows).unranked) == {
        "noscore": "no personalised score",
        "hid": "hidden by the organisers",
        "rej": "rejected: personal: NaN",
        "wait": "not scored yet (queued)",
    }


def test_track3_board_json_and_csv_publish_four_decimals():
    rows = [t3("p", "A", 0.123456789, personal_anls_std=0.0512345, global_unseen_anls=0.333333)]
    board = build_board(rows, threshold=0.8)
    assert [e.row.id for e in board.table(3).ranked] == ["p"]
    (entry,) = as_json(board, track=3)["ranked"]
    assert (entry["rank"], entry["personal_anls"], entry["personal_anls_std"],
            entry["global_unseen_anls"], entry["total_bytes"]) == (1, 0.1235, 0.0512, 0.3333,
                                                                    5000)  # fmt: skip
    assert "personal_clients" not in entry
    organisers = build_board(rows, threshold=0.8, public=False)
    assert as_json(organisers, track=3)["ranked"][0]["personal_anls"] == 0.123456789
    lines = csv_text(board, track=3).splitlines()
    header = lines[0].split(",")
    values = dict(zip(header, lines[1].split(","), strict=True))
    assert (values["track"], values["rank"], values["personal_anls"]) == ("3", "1", "0.1235")
    assert values["global_unseen_anls"] == "0.3333" and values["total_bytes"] == "5000"


def test_the_source_query_names_rows_fields_in_order() -> None:
    import dataclasses

    from leaderboard.source import _NAMES

    assert tuple(f.name for f in dataclasses.fields(Row)) == _NAMES
