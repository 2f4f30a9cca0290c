"""The leaderboard's version counter.

``board_version`` holds one row whose ``version`` every change to a submission increments in
the same transaction (``evaluator.crud``). The leaderboard's pages are cached per version, so a
score that lands, or an organiser's action, shows on the next request of every API process.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply this revision."""
    table = op.create_table(
        "board_version",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.bulk_insert(table, [{"id": 1, "version": 0}])


def downgrade() -> None:
    """Revert this revision."""
    op.drop_table("board_version")
