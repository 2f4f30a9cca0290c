"""Alembic environment: runs the evaluator's migrations on the engine given by core.db."""

from __future__ import annotations

from alembic import context
from sqlalchemy import text

from evaluator.core.db import make_engine
from evaluator.tables import Base

config = context.config
target_metadata = Base.metadata
# Any constant works: every process migrating the same PostgreSQL database takes this lock.
MIGRATION_LOCK_ID = 7_364_205_118


def run_migrations_online() -> None:
    """Run the migrations inside one transaction, serialised by an advisory lock on PostgreSQL."""
    engine = config.attributes.get("engine") or make_engine(
        config.get_main_option("sqlalchemy.url")
    )
    with engine.connect() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_lock(:id)"), {"id": MIGRATION_LOCK_ID})
            connection.commit()
        try:
            context.configure(
                connection=connection,
                target_metadata=target_metadata,
                render_as_batch=connection.dialect.name == "sqlite",
                compare_type=True,
            )
            with context.begin_transaction():
                context.run_migrations()
            connection.commit()
        finally:
            if connection.dialect.name == "postgresql":
                connection.execute(
                    text("SELECT pg_advisory_unlock(:id)"), {"id": MIGRATION_LOCK_ID}
                )
                connection.commit()


if context.is_offline_mode():
    context.configure(url=config.get_main_option("sqlalchemy.url"), target_metadata=target_metadata)
    with context.begin_transaction():
        context.run_migrations()
else:
    run_migrations_online()
