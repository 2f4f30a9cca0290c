"""Alembic revisions of the evaluator database."""
