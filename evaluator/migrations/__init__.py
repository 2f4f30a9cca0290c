"""Alembic migration environment of the evaluator database (ships with the package)."""
