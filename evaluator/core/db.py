"""Database engine, sessions and schema migrations (SQLAlchemy 2 + Alembic)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from functools import lru_cache
from pathlib import Path

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import QueuePool

from evaluator.core.config import DEFAULT_API_THREADS

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"
# PostgreSQL connections beyond the pool: dependency clean-up runs outside the thread limit.
PG_POOL_OVERFLOW = 4
# A pooled PostgreSQL connection idle for longer is pinged before use (see _ping_when_idle).
PING_AFTER_IDLE_SECONDS = 5.0


def make_engine(url: str, *, pool_size: int = DEFAULT_API_THREADS) -> Engine:
    """Create an engine for a SQLite file or a PostgreSQL server.

    The pool is sized from the API's thread pool: every blocking step of a request (and so every
    connection checkout) runs in one of ``pool_size`` threads, so a thread never waits for a
    connection held by a request that itself waits for a thread. SQLite connections are local
    file handles, so its pool may grow past that size instead of making anyone wait; PostgreSQL
    gets a few connections of headroom (dependency clean-up runs outside the thread limit) and a
    server whose ``max_connections`` bounds ``API processes x (pool_size + overflow)``.

    SQLite also gets a busy timeout and WAL journal so the API, the embedded worker and the CLI
    can share one file; PostgreSQL connections are pinged before use when they sat idle in the
    pool (``_ping_when_idle``), so a restarted server is survived.

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
    engine = create_engine(url, pool_size=pool_size, max_overflow=PG_POOL_OVERFLOW)
    _ping_when_idle(engine, PING_AFTER_IDLE_SECONDS)
    return engine


def _ping_when_idle(engine: Engine, idle_seconds: float) -> None:
    """Ping a pooled connection at checkout when it sat in the pool for ``idle_seconds``.

    SQLAlchemy's ``pool_pre_ping`` pings at every checkout: under load that was one more round
    trip (and a transaction begun for it) per request, for connections used milliseconds ago.
    A server restart closes idle connections, so those are the ones worth checking; a dead one
    is replaced (``DisconnectionError`` makes the pool open a new one). A connection that breaks
    while in use fails its request, and SQLAlchemy then invalidates the rest of the pool.
    """

    @event.listens_for(engine, "checkin")
    def _idle_since(_dbapi_connection, record) -> None:  # type: ignore[no-untyped-def]
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _ping(dbapi_connection, record, _proxy) -> None:  # type: ignore[no-untyped-def]
        idle_since = record.info.get("idle_since")
        if idle_since is None or time.monotonic() - idle_since < idle_seconds:
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
            dbapi_connection.rollback()
        except Exception as exc:
            if engine.dialect.is_disconnect(exc, dbapi_connection, None):
                raise DisconnectionError(str(exc)) from exc
            raise


@lru_cache(maxsize=8)
def get_engine(url: str, pool_size: int = DEFAULT_API_THREADS) -> Engine:
    """One shared engine per URL, pool size and process."""
    return make_engine(url, pool_size=pool_size)


def session_factory(url: str, *, pool_size: int = DEFAULT_API_THREADS) -> sessionmaker[Session]:
    """A session factory bound to the shared engine of ``url``."""
    return sessionmaker(bind=get_engine(url, pool_size), expire_on_commit=False)


def read_session_factory(
    url: str, *, pool_size: int = DEFAULT_API_THREADS
) -> sessionmaker[Session]:
    """Sessions for reads of one statement each; on PostgreSQL without a transaction.

    One ``SELECT`` is consistent on its own; without ``BEGIN`` and the ``ROLLBACK`` on return to
    the pool, a PostgreSQL read is one round trip instead of three (same pool as
    :func:`session_factory`). SQLite keeps the plain sessions: switching its connections to
    autocommit and back costs more than the transaction, which is local.
    """
    if url.startswith("sqlite"):
        return session_factory(url, pool_size=pool_size)
    engine = get_engine(url, pool_size).execution_options(isolation_level="AUTOCOMMIT")
    return sessionmaker(bind=engine, expire_on_commit=False)


@contextmanager
def committed(session: Session) -> Iterator[Session]:
    """Use ``session``: commit on success, roll back on error, close in any case."""
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def session_scope(url: str) -> AbstractContextManager[Session]:
    """A new session on ``url`` that commits on success and rolls back on error."""
    return committed(session_factory(url)())


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


@lru_cache(maxsize=1)
def code_heads() -> frozenset[str]:
    """The newest migrations this code knows (read once per process)."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return frozenset(ScriptDirectory.from_config(config).get_heads())


def revisions_of(connection: Connection) -> frozenset[str]:
    """The migrations the database behind ``connection`` is at (empty: never migrated)."""
    from alembic.runtime.migration import MigrationContext

    return frozenset(MigrationContext.configure(connection).get_current_heads())


def schema_is_current(url: str) -> bool:
    """Whether the database at ``url`` is at the newest migration."""
    with get_engine(url).connect() as connection:
        return revisions_of(connection) == code_heads()
