"""Database engine, sessions and schema migrations (SQLAlchemy 2 + Alembic)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import QueuePool

from evaluator.core.config import DEFAULT_API_THREADS

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"
# PostgreSQL connections beyond the pool: dependency clean-up runs outside the thread limit.
PG_POOL_OVERFLOW = 4


def make_engine(url: str, *, pool_size: int = DEFAULT_API_THREADS) -> Engine:
    """Create an engine for a SQLite file or a PostgreSQL server.

    The pool is sized from the API's thread pool: every blocking step of a request (and so every
    connection checkout) runs in one of ``pool_size`` threads, so a thread never waits for a
    connection held by a request that itself waits for a thread. SQLite connections are local
    file handles, so its pool may grow past that size instead of making anyone wait; PostgreSQL
    gets a few connections of headroom (dependency clean-up runs outside the thread limit) and a
    server whose ``max_connections`` bounds ``API processes x (pool_size + overflow)``.

    SQLite also gets a busy timeout and WAL journal so the API, the embedded worker and the CLI
    can share one file; PostgreSQL gets pre-ping so a restarted server is survived.

    Args:
        url: SQLAlchemy URL (``sqlite:///file.db`` or ``postgresql://...``).
        pool_size: connections kept open (the API's ``api_threads``).

    Returns:
        The engine.
    """
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    if url.startswith("sqlite"):
        path = url.split(":///", 1)[-1]
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            url,
            connect_args={"timeout": 30, "check_same_thread": False},
            poolclass=QueuePool,
            pool_size=pool_size,
            max_overflow=-1,
        )

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

        return engine
    return create_engine(
        url, pool_pre_ping=True, pool_size=pool_size, max_overflow=PG_POOL_OVERFLOW
    )


@lru_cache(maxsize=8)
def get_engine(url: str, pool_size: int = DEFAULT_API_THREADS) -> Engine:
    """One shared engine per URL, pool size and process."""
    return make_engine(url, pool_size=pool_size)


def session_factory(url: str, *, pool_size: int = DEFAULT_API_THREADS) -> sessionmaker[Session]:
    """A session factory bound to the shared engine of ``url``."""
    return sessionmaker(bind=get_engine(url, pool_size), expire_on_commit=False)


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
