"""Verification by reproduction (issue 45): a submission's re-run, its state and its verdict.

``submissions.reproduction``: null when the policy did not select it, then ``queued``,
``reproducing`` and the verdict (``reproduced exactly``, ``reproduced within tolerance``, ``not
reproduced``, ``failed``); ``reproduction_reason`` the verdict's sentence; ``reproduction_report``
its figures (never the recipe); the worker that holds it and since when.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply this revision."""
    with op.batch_alter_table("submissions") as batch:
        batch.add_column(sa.Column("reproduction", sa.String(32), nullable=True))
        batch.add_column(sa.Column("reproduction_reason", sa.Text(), nullable=True))
        batch.add_column(sa.Column("reproduction_report", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("reproduction_owner", sa.String(64), nullable=True))
        batch.add_column(
            sa.Column("reproduction_started_at", sa.DateTime(timezone=True), nullable=True)
        )
    op.create_index("ix_submissions_reproduction", "submissions", ["reproduction"])


def downgrade() -> None:
    """Revert this revision."""
    op.drop_index("ix_submissions_reproduction", table_name="submissions")
    with op.batch_alter_table("submissions") as batch:
        for column in ("reproduction_started_at", "reproduction_owner", "reproduction_report",
                       "reproduction_reason", "reproduction"):  # fmt: skip
            batch.drop_column(column)
