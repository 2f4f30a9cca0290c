"""The federated self-pretraining phase run on the engine: its federation
(:mod:`baselines.fsp_phase.federation`: the phase's rounds and their log, then the fine-tuning's)
and its task (:mod:`baselines.fsp_phase.task`: denoising batches of the clients' own pages). The
method's parts, which the run's configuration reads, are :mod:`baselines.fsp`'s."""
