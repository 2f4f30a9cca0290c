"""The scoring workers' registry and heartbeats (issue 46).

``workers``: one row per worker process (``pflkit worker`` or the one embedded in ``pflkit
serve``), with its host, pid, state (``starting``, ``ready``, ``refused``, ``stopped``), the
reason it refused to start, when it started, its last heartbeat and the submissions it holds.
``/readyz``, the status of a queued submission, the organiser page and ``/metrics`` read it.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply this revision."""
    op.create_table(
        "workers",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("embedded", sa.Boolean(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_beat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("holding", sa.Text(), server_default="", nullable=False),
    )
    op.create_index("ix_workers_state_beat", "workers", ["state", "last_beat_at"])


def downgrade() -> None:
    """Revert this revision."""
    op.drop_index("ix_workers_state_beat", table_name="workers")
    op.drop_table("workers")
