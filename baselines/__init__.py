"""Federated engine, track-1 baselines (FedAvg, LoRA, NF4 wire) and exact communication logs.

`pflkit train` (``baselines.cli``) runs a preset; the engine (``baselines.engine``) runs its
rounds (``baselines.engine.simulation.FederatedSimulation`` in one process); methods
(``baselines.methods``: what clients train and send), strategies (``baselines.strategies``: how
the server combines) and wire formats (``baselines.wire``) are separate, pluggable axes. See
docs/participants/baselines.md.
"""
