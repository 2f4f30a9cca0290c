"""Model families: the family of each submission's checkpoint (``vt5`` for every earlier one).

``submissions.family``: the ``family`` ``submission.json`` declares (``benchmark.model.families``),
set at upload like ``method``; the worker scores the checkpoint with that family's reference and
the leaderboard shows it. A plain ``ADD COLUMN`` with a server default: SQLite adds it in place
(no table copy), PostgreSQL fills every existing row with ``vt5``.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply this revision."""
    op.add_column(
        "submissions",
        sa.Column("family", sa.String(40), nullable=False, server_default="vt5"),
    )


def downgrade() -> None:
    """Revert this revision."""
    op.drop_column("submissions", "family")
