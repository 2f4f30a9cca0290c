"""Migration 0010 moves track 3's figures from the ``submissions`` columns into
``submission_figures`` value for value, keeps every other row (events, other tracks' scores),
and its downgrade puts them back; on SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt
import json

from alembic import command
from sqlalchemy import text

from evaluator.core.db import alembic_config, get_engine

CLIENTS = [{"client": 0, "n": 3, "personal_anls": 0.123456789, "global_anls": 0.1,
            "personalised": True}, {"client": 1, "n": 0, "personal_anls": None,
                                    "global_anls": None, "personalised": False}]  # fmt: skip
TRACK3 = {"personal_anls": 0.5219123456789, "personal_anls_std": 0.0812, "personal_worst_client": 1,
          "personal_worst_anls": 0.0, "global_personal_anls": 0.47, "global_unseen_anls": 0.2702,
          "n_personal": 33}  # fmt: skip
REPORT = {"files_bytes": 12, "flag": "declared-frozen"}
T0 = dt.datetime(2026, 5, 1, tzinfo=dt.UTC)


def _fill_at_0009(connection) -> None:  # type: ignore[no-untyped-def]
    connection.execute(text(
        "INSERT INTO teams (id, name, name_key, token_hash, is_organiser, created_at, upload_seq) "
        "VALUES (1, 'alpha', 'alpha', 'h', false, :at, 0)"), {"at": T0})  # fmt: skip
    columns = ", ".join(TRACK3)
    for sid, track in (("s3", 3), ("s1", 1)):
        connection.execute(text(
            "INSERT INTO submissions (id, team_id, track, method, description, "
            "submission_metadata, status, created_at, updated_at, attempts, has_privacy, hidden, "
            "board_version, anls) VALUES (:id, 1, :track, 'm', '', '{}', 'finished', :at, :at, "
            "1, false, false, 1, 0.4)"), {"id": sid, "track": track, "at": T0})  # fmt: skip
        connection.execute(text(
            "INSERT INTO submission_events (submission_id, to_status, at) "
            "VALUES (:id, 'finished', :at)"), {"id": sid, "at": T0})  # fmt: skip
    values = ", ".join(f":{name}" for name in TRACK3)
    connection.execute(
        text(f"UPDATE submissions SET ({columns}, personal_clients, personal_report) = "
             f"({values}, :clients, :report) WHERE id = 's3'"),
        {**TRACK3, "clients": json.dumps(CLIENTS), "report": json.dumps(REPORT)},
    )  # fmt: skip


def test_track3_figures_move_into_their_table_and_back(database_url: str) -> None:
    config = alembic_config(database_url)
    command.downgrade(config, "0009")
    engine = get_engine(database_url)
    with engine.begin() as connection:
        _fill_at_0009(connection)

    command.upgrade(config, "0010")
    with engine.connect() as connection:
        figures = {row.figure: (row.number, row.document) for row in connection.execute(
            text("SELECT figure, number, document FROM submission_figures "
                 "WHERE submission_id = 's3'"))}  # fmt: skip
        others = connection.execute(
            text("SELECT count(*) FROM submission_figures WHERE submission_id = 's1'")).scalar()
        events = connection.execute(text("SELECT count(*) FROM submission_events")).scalar()
        anls = connection.execute(text("SELECT anls FROM submissions WHERE id = 's3'")).scalar()
    document = {name: json.loads(d) if isinstance(d, str) else d for name, (_, d) in
                figures.items()}  # fmt: skip
    assert {name: figures[name][0] for name in TRACK3} == TRACK3
    assert document["personal_clients"] == CLIENTS and document["personal_report"] == REPORT
    assert others == 0 and events == 2 and anls == 0.4

    command.downgrade(config, "0009")
    with engine.connect() as connection:
        row = connection.execute(
            text(f"SELECT {', '.join(TRACK3)}, personal_clients, personal_report "
                 "FROM submissions WHERE id = 's3'")).mappings().one()  # fmt: skip
        events = connection.execute(text("SELECT count(*) FROM submission_events")).scalar()
    back = {name: json.loads(row[name]) if isinstance(row[name], str) else row[name]
            for name in ("personal_clients", "personal_report")}  # fmt: skip
    assert {name: row[name] for name in TRACK3} == TRACK3
    assert back == {"personal_clients": CLIENTS, "personal_report": REPORT} and events == 2
    command.upgrade(config, "head")
