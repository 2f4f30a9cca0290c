"""`pflkit leaderboard show` and `export` on a real SQLite database."""

from __future__ import annotations

import json

import pandas as pd
from click.testing import CliRunner

from pflkit.cli import main


def test_show_json_and_tables_and_export(served, tmp_path):
    runner = CliRunner()
    ids = served.ids
    result = runner.invoke(
        main, ["leaderboard", "show", "--db", served.db_url, "--track", "1", "--json"]
    )
    assert result.exit_code == 0, result.output
    answer = json.loads(result.output)
    # Without the benchmark directory the real-data threshold 0.8242 applies.
    assert answer["threshold"] == 0.8242
    assert [r["id"] for r in answer["ranked"]] == [
        ids["alpha-nf4"],
        ids["beta-shampoo"],
        ids["gamma-at"],
    ]
    strict = runner.invoke(
        main,
        [
            "leaderboard",
            "show",
            "--db",
            served.db_url,
            "--threshold",
            "0.88",
            "--track",
            "1",
            "--json",
        ],
    )
    assert [r["id"] for r in json.loads(strict.output)["ranked"]] == [ids["beta-shampoo"]]

    tables = runner.invoke(main, ["leaderboard", "show", "--db", served.db_url])
    assert tables.exit_code == 0, tables.output
    assert "Track 2: epsilon <= 4" in tables.output and "7.7 MB" in tables.output
    # every unranked row with its reason, as the API gives it
    track1 = json.loads(result.output)["unranked"]
    assert track1
    assert f"  not ranked: {len(track1)}" in tables.output
    for entry in track1:
        assert f"{entry['method'][:28]:<28} {entry['reason']}" in tables.output

    out = tmp_path / "board.csv"
    exported = runner.invoke(
        main, ["leaderboard", "export", "--db", served.db_url, "--all", "--out", str(out)]
    )
    assert exported.exit_code == 0, exported.output
    assert len(pd.read_csv(out)) == 12  # track 1: 4 ranked + 2 unranked; track 2: 1 + 2 + 2 + 1

    missing = runner.invoke(
        main, ["leaderboard", "show", "--db", f"sqlite:///{tmp_path / 'none.db'}"]
    )
    assert missing.exit_code != 0 and "no evaluator database at" in missing.output
    assert not (tmp_path / "none.db").exists()


def test_show_prints_the_track3_table(served_personal):
    result = CliRunner().invoke(
        main, ["leaderboard", "show", "--db", served_personal.db_url, "--track", "3"],
        terminal_width=160,
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert any("Track 3: highest mean personalised ANLS" in line for line in lines)
    first = next(line for line in lines if line.strip().startswith("1  beta"))
    assert first.split()[-6:] == ["0.5219", "0.0812", "0.3904", "0.2702", "0", "B"]
    assert "not ranked: 1" in result.output
