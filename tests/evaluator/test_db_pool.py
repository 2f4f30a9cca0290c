"""PostgreSQL connections: a pooled connection that died while idle is replaced, not used."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from evaluator.core import db


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
@pytest.mark.postgres
def test_a_connection_killed_while_idle_is_replaced(database_url: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(db, "PING_AFTER_IDLE_SECONDS", 0.0)
    engine = db.make_engine(database_url, pool_size=1)
    try:
        with engine.connect() as connection:
            first = connection.execute(text("SELECT pg_backend_pid()")).scalar_one()
        # As a server restart does: the backend of the pooled (idle) connection goes away.
        with db.make_engine(database_url, pool_size=1).connect() as admin:
            admin.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": first})
        with engine.connect() as connection:  # pinged at checkout, found dead, replaced
            second = connection.execute(text("SELECT pg_backend_pid()")).scalar_one()
        assert second != first
    finally:
        engine.dispose()


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
@pytest.mark.postgres
def test_a_connection_in_steady_use_is_not_pinged(database_url: str) -> None:
    engine = db.make_engine(database_url, pool_size=1)
    statements: list[str] = []
    try:
        from sqlalchemy import event

        event.listen(engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
        for _ in range(3):
            with engine.connect() as connection:
                connection.execute(text("SELECT 2"))
        assert statements == ["SELECT 2"] * 3
    finally:
        engine.dispose()
