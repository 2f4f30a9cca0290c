"""Per-submission change markers of the public board.

``submissions.board_version`` (indexed) holds the board version of each submission's latest
change, set in the change's transaction, so the board pages re-read only the submissions
changed since the version they last read. ``board_version.unmarked_version`` is the version of
the last change no marker shows (a deleted submission): a reader whose rows are older reads
them all again. Existing rows get 0: a reader's first read is always a full one.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply this revision."""
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("board_version", sa.BigInteger(), server_default="0", nullable=False)
        )
        batch_op.create_index("ix_submissions_board_version", ["board_version"], unique=False)
    with op.batch_alter_table("board_version", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("unmarked_version", sa.BigInteger(), server_default="0", nullable=False)
        )


def downgrade() -> None:
    """Revert this revision."""
    with op.batch_alter_table("board_version", schema=None) as batch_op:
        batch_op.drop_column("unmarked_version")
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.drop_index("ix_submissions_board_version")
        batch_op.drop_column("board_version")
