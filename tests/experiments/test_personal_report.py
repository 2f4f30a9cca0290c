"""The track-3 report: a table's data file and a per-client plot from hand-made scores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.personal_report import (
    main,
    per_client_csv,
    personal_table,
    plot_per_client,
    read_personal,
)


def _scores(personal: list[float], global_: list[float], flags: list[bool]) -> dict:
    clients = [
        {"client": k, "n": 10 * (k + 1), "personal_anls": p, "global_anls": g, "personalised": f}
        for k, (p, g, f) in enumerate(zip(personal, global_, flags, strict=True))
    ]
    n = sum(c["n"] for c in clients)
    return {
        "clients": clients,
        "personal_anls": sum(c["n"] * c["personal_anls"] for c in clients) / n,
        "personal_anls_std": 0.05,
        "worst_client": 0,
        "worst_anls": personal[0],
        "global_personal_anls": sum(c["n"] * c["global_anls"] for c in clients) / n,
        "unseen_anls": 0.4,
        "n": n,
        "unseen_n": 7,
        "seconds": 1.0,
    }


def test_table_and_plot(tmp_path: Path) -> None:
    base = tmp_path / "track3-base-seed0"
    tuned = tmp_path / "track3-fedavg-ft-seed0"
    for directory, scores in (
        (base, _scores([0.2, 0.4], [0.2, 0.4], [False, False])),
        (tuned, _scores([0.3, 0.6], [0.2, 0.4], [True, True])),
    ):
        directory.mkdir()
        (directory / "personal_test.json").write_text(json.dumps(scores))
    (tuned / "submission.json").write_text(
        json.dumps({"total_bytes": 2_500_000, "timing": {"wall": 12.0}})
    )
    reports = [read_personal(base), read_personal(tuned)]
    assert [r.name for r in reports] == ["base", "fedavg-ft"]
    assert not reports[0].personalised and reports[1].personalised
    table = personal_table(reports)
    # (10 x 0.3 + 20 x 0.6) / 30 = 0.5; (10 x 0.2 + 20 x 0.4) / 30 = 0.3333
    assert table.rows[1] == {
        "submission": "fedavg-ft", "personalised": "0.5000 ± 0.0500",
        "worst_client": "0.3000 (client 0)", "global_personal": pytest.approx(1 / 3),
        "global_unseen": 0.4, "total_bytes": "2.50 MB", "wall": "12 s",
    }  # fmt: skip
    assert table.rows[0]["personalised"] == "0.3333 ± 0.0500"
    assert (table.rows[0]["total_bytes"], table.rows[0]["wall"]) == ("0", "-")
    plot = plot_per_client(reports, tmp_path / "plot.png")
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert per_client_csv(reports) == (
        "client,questions,base,fedavg-ft\n0,10,0.2000,0.3000\n1,20,0.4000,0.6000\n"
    )
    main(
        [
            str(base),
            str(tuned),
            "--out",
            str(tmp_path / "track3.json"),
            "--plot",
            str(tmp_path / "again.png"),
            "--csv",
            str(tmp_path / "clients.csv"),
        ]
    )
    assert (tmp_path / "again.png").stat().st_size > 1000
    assert (tmp_path / "clients.csv").read_text() == per_client_csv(reports)
    written = json.loads((tmp_path / "track3.json").read_text())
    assert written["rows"] == json.loads(json.dumps(table.rows))
    assert [column["key"] for column in written["columns"]] == list(table.rows[0])
    assert written["command"].startswith("python -m experiments.personal_report ")
