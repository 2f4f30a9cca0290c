"""The federated engine: the round loop and the parties it drives, independent of any method.

:mod:`~baselines.engine.simulation` runs the rounds in one process
(:class:`~baselines.engine.simulation.FederatedSimulation`); a round is the server's part
(:mod:`~baselines.engine.server`: sample, broadcast, aggregate) and each sampled client's
(:mod:`~baselines.engine.client`, :mod:`~baselines.engine.local_training`), over a logged channel
(:mod:`~baselines.engine.communication`) that carries the communicated parameters of a model
placed on its device (:mod:`~baselines.engine.placement`). :mod:`~baselines.engine.document_task`
builds the kit's task (a model of any family on a PFL-DocVQA data directory). Flower's engines
(:mod:`baselines.flower`) drive the same parties.

The engine sits above what it drives: it imports the run's configuration
(:mod:`baselines.config`, which builds the method, strategy, optimiser and wire format by name),
the components' interfaces, the run directory and the submission writer. What they share with it
(``ClientJob``, ``ClientUpdate``, ``FederatedTask``, ``CommunicationLog``, the communicated
parameters) is a floor below all of them, :mod:`baselines.core`, so none of them imports the
engine. Nothing is imported here.
"""
