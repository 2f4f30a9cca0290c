"""Database engine, sessions and schema migrations (SQLAlchemy 2 + Alembic)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"


def make_engine(url: str) -> Engine:
    """Create an engine for a SQLite file or a PostgreSQL server.

    SQLite gets a busy timeout and WAL journal so the API, the embedded worker and the CLI can
    share one file; PostgreSQL gets pre-ping so a restarted server is survived.

    Args:
        url: SQLAlchemy URL (``sqlite:///file.db`` or ``postgresql://...``).

    Returns:
        The engine.
    """
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    if url.startswith("sqlite"):
        path = url.split(":///", 1)[-1]
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)


@lru_cache(maxsize=8)
def get_engine(url: str) -> Engine:
    """One shared engine per URL and process."""
    return make_engine(url)


def session_factory(url: str) -> sessionmaker[Session]:
    """A session factory bound to the shared engine of ``url``."""
    return sessionmaker(bind=get_engine(url), expire_on_commit=False)


@contextmanager
def session_scope(url: str) -> Iterator[Session]:
    """A session that commits on success and rolls back on error."""
    session = session_factory(url)()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def alembic_config(url: str):  # type: ignore[no-untyped-def]
    """The Alembic configuration of the evaluator's migrations for ``url``."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    config.attributes["engine"] = get_engine(url)
    return config


def migrate(url: str) -> None:
    """Bring the database at ``url`` to the newest schema (idempotent, safe to run concurrently).

    Args:
        url: SQLAlchemy URL.
    """
    from alembic import command

    command.upgrade(alembic_config(url), "head")


def schema_is_current(url: str) -> bool:
    """Whether the database at ``url`` is at the newest migration."""
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config(url))
    with get_engine(url).connect() as connection:
        current = MigrationContext.configure(connection).get_current_heads()
    return set(current) == set(script.get_heads())
