"""Track 3 (personalisation): the personalised and global figures of a submission.

``submissions.personal_anls`` (the ranking figure), ``personal_anls_std``,
``personal_worst_client``, ``personal_worst_anls``, ``global_personal_anls``,
``global_unseen_anls``, ``n_personal``, ``personal_clients`` (per-client figures, JSON) and
``personal_report`` (the organisers' report, JSON). All nullable: rows of tracks 1 and 2 keep
NULL.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

COLUMNS = (
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


def upgrade() -> None:
    """Apply this revision."""
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        for name, kind in COLUMNS:
            batch_op.add_column(sa.Column(name, kind(), nullable=True))


def downgrade() -> None:
    """Revert this revision."""
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        for name, _ in reversed(COLUMNS):
            batch_op.drop_column(name)
