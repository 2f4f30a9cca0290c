"""The experiment scripts train and score on the engine tests' `tiny` benchmark and base."""

from tests.baselines.conftest import _one_thread, tiny_base, tiny_data

__all__ = ["_one_thread", "tiny_base", "tiny_data"]
