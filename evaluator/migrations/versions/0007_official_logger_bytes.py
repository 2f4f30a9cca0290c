"""What the official starter kit's logger would have counted, beside the exact tally (issue 34).

``submissions.official_logger_total_bytes``: the run's declared ``official_logger_total_bytes``
(``submission.json``), shown beside ``total_bytes`` (the evaluator's tally of the communication
log, which ranks track 1) so participants can compare with the competition's published tables.
Nullable: rows scored before, and uploads that do not declare it, keep NULL.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply this revision."""
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("official_logger_total_bytes", sa.BigInteger(), nullable=True)
        )


def downgrade() -> None:
    """Revert this revision."""
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.drop_column("official_logger_total_bytes")
