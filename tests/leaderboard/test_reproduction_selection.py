"""The ``top k`` reproduction policy on hand-made boards: which submissions are selected."""

from __future__ import annotations

from leaderboard.board import build_board
from leaderboard.reproduction_selection import to_reproduce
from tests.leaderboard.test_ranking import row


def _board(rows):
    return build_board(rows, threshold=0.5, public=False)


def test_top_k_of_track_1_by_bytes_each_team_once():
    rows = [
        row("a", "A", total_bytes=300),
        row("a2", "A", total_bytes=200),
        row("b", "B", total_bytes=400),
        row("c", "C", total_bytes=500),
        row("below", "D", total_bytes=10, anls=0.1),
    ]
    assert to_reproduce(_board(rows), {1: 2}) == ["a2", "b"]
    assert to_reproduce(_board(rows), {1: "all"}) == []
    assert to_reproduce(_board(rows), {1: "off", 2: 3}) == []


def test_top_k_of_each_privacy_budget():
    rows = [
        row("e1", "A", track=2, epsilon=1.0, delta=1e-5, privacy_verified=True, anls=0.3),
        row("e4", "B", track=2, epsilon=4.0, delta=1e-5, privacy_verified=True, anls=0.6),
        row("e8", "C", track=2, epsilon=8.0, delta=1e-5, privacy_verified=True, anls=0.7),
        row("unverified", "D", track=2, epsilon=1.0, delta=1e-5, privacy_verified=False,
            anls=0.9),  # fmt: skip
    ]
    # epsilon <= 1: e1; <= 4: e4 (a claim counts in every looser budget); <= 8: e8
    assert to_reproduce(_board(rows), {2: 1}) == ["e1", "e4", "e8"]


def test_selected_ones_are_not_selected_again_and_a_dropped_one_lets_the_next_in():
    rows = [
        row("first", "A", total_bytes=100, reproduction="reproducing"),
        row("second", "B", total_bytes=200),
        row("third", "C", total_bytes=300),
    ]
    assert to_reproduce(_board(rows), {1: 2}) == ["second"]
    rows[0] = row("first", "A", total_bytes=100, reproduction="not reproduced",
                  reproduction_reason="round 1 differs")  # fmt: skip
    rows[1] = row("second", "B", total_bytes=200, reproduction="queued")
    assert to_reproduce(_board(rows), {1: 2}) == ["third"]


def test_hidden_submissions_are_not_selected():
    rows = [row("hidden", "A", total_bytes=1, hidden=True), row("shown", "B", total_bytes=2)]
    assert to_reproduce(_board(rows), {1: 1}) == ["shown"]
