"""The floor of :mod:`baselines`: the types the engine and its components share.

The engine (:mod:`baselines.engine`) drives methods, strategies, wire formats, the run directory
and the submission writer; they all speak of the same few things, which live here, one concept
per module, so that every one of them imports them from below and none imports the engine:

- :mod:`~baselines.core.parameters`: the communicated set of a model (``CommunicatedParameters``)
  and reading and writing its values;
- :mod:`~baselines.core.training`: what local training is to a job (the ``Trainer`` a job calls,
  its ``TrainStats``, the ``LossHook`` and ``Collate`` callables);
- :mod:`~baselines.core.client_job`: a sampled client's work in a round (``ClientJob``, the
  default ``local_training_update``);
- :mod:`~baselines.core.client_update`: what a client sends back (``ClientUpdate``);
- :mod:`~baselines.core.task`: a model family and the federation's data (``FederatedTask``);
- :mod:`~baselines.core.communication_log`: every message of a run (``CommunicationLog``,
  ``MessageRecord``).

Nothing here imports another module of :mod:`baselines` (an import-linter contract in
pyproject.toml keeps it so), and nothing is imported in this file.
"""
