"""Initial schema: teams, submissions and their state transitions.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply this revision."""
    op.create_table(
        "teams",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("is_organiser", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("upload_seq", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    with op.batch_alter_table("teams", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_teams_token_hash"), ["token_hash"], unique=True)

    op.create_table(
        "submissions",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("team_id", sa.Integer(), nullable=False),
        sa.Column("track", sa.Integer(), nullable=False),
        sa.Column("method", sa.String(length=200), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("submission_metadata", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("queued_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("scoring_started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("lease_owner", sa.String(length=64), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("model_bytes", sa.BigInteger(), nullable=True),
        sa.Column("model_sha256", sa.String(length=64), nullable=True),
        sa.Column("has_privacy", sa.Boolean(), nullable=False),
        sa.Column("anls", sa.Float(), nullable=True),
        sa.Column("accuracy", sa.Float(), nullable=True),
        sa.Column("anls_in", sa.Float(), nullable=True),
        sa.Column("anls_out", sa.Float(), nullable=True),
        sa.Column("accuracy_in", sa.Float(), nullable=True),
        sa.Column("accuracy_out", sa.Float(), nullable=True),
        sa.Column("n_questions", sa.Integer(), nullable=True),
        sa.Column("n_in", sa.Integer(), nullable=True),
        sa.Column("n_out", sa.Integer(), nullable=True),
        sa.Column("scoring_seconds", sa.Float(), nullable=True),
        sa.Column("total_bytes", sa.BigInteger(), nullable=True),
        sa.Column("bytes_up", sa.BigInteger(), nullable=True),
        sa.Column("bytes_down", sa.BigInteger(), nullable=True),
        sa.Column("rounds", sa.Integer(), nullable=True),
        sa.Column("messages", sa.Integer(), nullable=True),
        sa.Column("per_round", sa.JSON(), nullable=True),
        sa.Column("epsilon", sa.Float(), nullable=True),
        sa.Column("delta", sa.Float(), nullable=True),
        sa.Column("privacy_verified", sa.Boolean(), nullable=True),
        sa.Column("privacy_report", sa.JSON(), nullable=True),
        sa.Column("hidden", sa.Boolean(), nullable=False),
        sa.Column("disqualified_reason", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["team_id"], ["teams.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_submissions_status"), ["status"], unique=False)
        batch_op.create_index(
            "ix_submissions_status_lease", ["status", "lease_expires_at"], unique=False
        )
        batch_op.create_index(
            "ix_submissions_team_created", ["team_id", "created_at"], unique=False
        )
        batch_op.create_index("ix_submissions_track_status", ["track", "status"], unique=False)

    op.create_table(
        "submission_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("submission_id", sa.String(length=36), nullable=False),
        sa.Column("from_status", sa.String(length=16), nullable=True),
        sa.Column("to_status", sa.String(length=16), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("worker", sa.String(length=64), nullable=True),
        sa.ForeignKeyConstraint(["submission_id"], ["submissions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("submission_events", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_submission_events_submission_id"), ["submission_id"], unique=False
        )


def downgrade() -> None:
    """Revert this revision."""
    with op.batch_alter_table("submission_events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_submission_events_submission_id"))

    op.drop_table("submission_events")
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.drop_index("ix_submissions_track_status")
        batch_op.drop_index("ix_submissions_team_created")
        batch_op.drop_index("ix_submissions_status_lease")
        batch_op.drop_index(batch_op.f("ix_submissions_status"))

    op.drop_table("submissions")
    with op.batch_alter_table("teams", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_teams_token_hash"))

    op.drop_table("teams")
