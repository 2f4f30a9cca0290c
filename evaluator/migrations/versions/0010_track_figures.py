"""A track's own figures keyed by name (issue 48): the ``submission_figures`` table, and track 3's
nine figures moved into it from the ``submissions`` columns of migration 0004, value for value.

One row per (submission, figure) with a value: numbers (float, int, bool) in ``number`` (a
double, which holds these exactly), JSON documents in ``document``; a figure without a value has
no row. A track with a figure of its own needs no migration after this one. The downgrade puts
the values back into the columns.

The figures moved are named here, as they were in 0004, not read from the tracks' declarations:
a migration is history and must not change with the code.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

#: track 3's columns of migration 0004 and their types; JSON ones go to ``document``.
MOVED = (
    ("personal_anls", sa.Float),
    ("personal_anls_std", sa.Float),
    ("personal_worst_client", sa.Integer),
    ("personal_worst_anls", sa.Float),
    ("global_personal_anls", sa.Float),
    ("global_unseen_anls", sa.Float),
    ("n_personal", sa.Integer),
    ("personal_clients", sa.JSON),
    ("personal_report", sa.JSON),
)
BATCH = 500


def _submissions(columns: tuple[tuple[str, Any], ...]) -> sa.TableClause:
    """The ``submissions`` table with its id and these columns (typed, so JSON reads back)."""
    return sa.table("submissions", sa.column("id", sa.String),
                    *(sa.column(name, kind()) for name, kind in columns))  # fmt: skip


def _figures() -> sa.TableClause:
    return sa.table(
        "submission_figures", sa.column("submission_id", sa.String), sa.column("figure", sa.String),
        sa.column("number", sa.Float), sa.column("document", sa.JSON(none_as_null=True)),
    )  # fmt: skip


def _figure_rows(row: Any) -> list[dict[str, Any]]:
    """The ``submission_figures`` rows of one submission's moved columns that hold a value."""
    out = []
    for name, kind in MOVED:
        value = getattr(row, name)
        if value is None:
            continue
        document = kind is sa.JSON
        out.append({"submission_id": row.id, "figure": name,
                    "number": None if document else float(value),
                    "document": value if document else None})  # fmt: skip
    return out


def upgrade() -> None:
    """Apply this revision: create the table, copy the values, drop the columns."""
    op.create_table(
        "submission_figures",
        sa.Column("submission_id", sa.String(36),
                  sa.ForeignKey("submissions.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("figure", sa.String(64), primary_key=True),
        sa.Column("number", sa.Float(), nullable=True),
        sa.Column("document", sa.JSON(), nullable=True),
    )  # fmt: skip
    connection = op.get_bind()
    rows = [r for row in connection.execute(sa.select(_submissions(MOVED))).all()
            for r in _figure_rows(row)]  # fmt: skip
    for start in range(0, len(rows), BATCH):
        connection.execute(sa.insert(_figures()), rows[start : start + BATCH])
    for name, _ in reversed(MOVED):
        # ALTER TABLE ... DROP COLUMN on both databases (SQLite >= 3.35): a batch operation
        # would copy the table and drop the old one, and on SQLite with foreign keys on that
        # drop deletes every row that references a submission (its events, its figures).
        op.drop_column("submissions", name)


def downgrade() -> None:
    """Revert this revision: the columns back, their values copied back, the table dropped."""
    with op.batch_alter_table("submissions") as batch:
        for name, kind in MOVED:
            batch.add_column(sa.Column(name, kind(), nullable=True))
    connection = op.get_bind()
    figures, submissions = _figures(), _submissions(MOVED)
    values: dict[str, dict[str, Any]] = {}
    for row in connection.execute(sa.select(figures)):
        kind = dict(MOVED).get(row.figure)
        if kind is None:
            continue  # a figure of a track that did not exist before this revision
        value = row.document if kind is sa.JSON else row.number
        if kind is sa.Integer and value is not None:
            value = int(value)
        values.setdefault(row.submission_id, {})[row.figure] = value
    for submission_id, columns in values.items():
        connection.execute(
            sa.update(submissions).where(submissions.c.id == submission_id).values(**columns)
        )
    op.drop_table("submission_figures")
