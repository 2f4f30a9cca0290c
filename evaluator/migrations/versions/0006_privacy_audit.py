"""The one-run privacy audit with canary providers (issue 18, part 2).

``submissions.audit_epsilon`` (the empirical epsilon lower bound at 95% confidence),
``audit_auc``, ``audit_tpr`` (at ``audit_fpr``), ``audit_seconds``, ``audit_contradicted``
(a privacy claim whose epsilon is below the bound) and ``audit_report`` (JSON: guesses,
canaries, delta tested, or why the audit was skipped). All nullable: rows scored before, or on
a benchmark without canaries, keep NULL.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

COLUMNS = (
    ("audit_epsilon", sa.Float),
    ("audit_auc", sa.Float),
    ("audit_tpr", sa.Float),
    ("audit_fpr", sa.Float),
    ("audit_seconds", sa.Float),
    ("audit_contradicted", sa.Boolean),
    ("audit_report", sa.JSON),
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
