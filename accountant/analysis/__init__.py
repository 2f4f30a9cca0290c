"""Stateless privacy analyses, one module per accountant (the stateful classes wrap them)."""
