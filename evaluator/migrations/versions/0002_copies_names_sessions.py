"""Copies, team-name keys and organiser sessions.

``submissions.copy_of`` (the earlier submission whose checkpoint this one repeats) and an index
on ``model_sha256``; ``teams.name_key`` (the confusable skeleton that makes ``alice`` and
``аlice`` one team), unique; ``organiser_sessions`` (opaque, expiring sign-in sessions of the
organiser pages, stored as hashes).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply this revision."""
    from evaluator import team_names

    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("copy_of", sa.String(length=36), nullable=True))
        batch_op.create_index("ix_submissions_model_sha256", ["model_sha256"], unique=False)
    with op.batch_alter_table("teams", schema=None) as batch_op:
        batch_op.add_column(sa.Column("name_key", sa.String(length=100), nullable=True))
    connection = op.get_bind()
    teams = sa.table("teams", sa.column("id", sa.Integer), sa.column("name", sa.String),
                     sa.column("name_key", sa.String))  # fmt: skip
    for team_id, name in connection.execute(sa.select(teams.c.id, teams.c.name)).all():
        connection.execute(
            teams.update().where(teams.c.id == team_id).values(name_key=team_names.key(name))
        )
    with op.batch_alter_table("teams", schema=None) as batch_op:
        batch_op.alter_column("name_key", existing_type=sa.String(length=100), nullable=False)
        batch_op.create_index("ix_teams_name_key", ["name_key"], unique=True)
    op.create_table(
        "organiser_sessions",
        sa.Column("id_hash", sa.String(length=64), nullable=False),
        sa.Column("team_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["team_id"], ["teams.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id_hash"),
    )


def downgrade() -> None:
    """Revert this revision."""
    op.drop_table("organiser_sessions")
    with op.batch_alter_table("teams", schema=None) as batch_op:
        batch_op.drop_index("ix_teams_name_key")
        batch_op.drop_column("name_key")
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.drop_index("ix_submissions_model_sha256")
        batch_op.drop_column("copy_of")
