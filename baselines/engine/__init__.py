"""The federated engine: the round loop and the parties it drives, independent of any method.

:mod:`~baselines.engine.simulation` runs the rounds in one process
(:class:`~baselines.engine.simulation.FederatedSimulation`); a round is the server's part
(:mod:`~baselines.engine.server`: sample, broadcast, aggregate) and each sampled client's
(:mod:`~baselines.engine.client`, :mod:`~baselines.engine.client_job`,
:mod:`~baselines.engine.local_training`), over a logged channel
(:mod:`~baselines.engine.communication`) that carries the communicated parameters
(:mod:`~baselines.engine.parameters`) of a model placed on its device
(:mod:`~baselines.engine.placement`). What the engine needs of a model and its data is a
:class:`~baselines.engine.task.FederatedTask`; :mod:`~baselines.engine.vt5_task` builds the
kit's (VT5 on a PFL-DocVQA data directory). Flower's engines (:mod:`baselines.flower`) drive the
same parties.

Nothing is imported here: methods and strategies import the engine's modules they build on
(``client_job``, ``local_training``), and the engine's loop imports the methods' registry.
"""
