"""Verification by reproduction: the organisers re-run a submission's recipe in a sandbox.

A submission's files show what a run produced; its recipe (``recipe.json``: the configuration,
seeds, data fingerprint, the kit's version and digest, the machine, and the participant's own
component files) says how. The evaluator re-runs that recipe on its own copy of the training
data, in a process tree with no network and read-only inputs (:mod:`.sandbox`), and compares
what the re-run sent and produced with what was submitted (:mod:`.verdict`).
"""
