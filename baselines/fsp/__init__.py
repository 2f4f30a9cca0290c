"""Federated self-pretraining (FSP): denoising pre-training on the clients' own pages, federated,
before fine-tuning (pilot study, section 3.3). ``pflkit train --fsp-rounds N`` runs it; see
:mod:`baselines.fsp.federation` for the phase and the log, :mod:`baselines.fsp.vocabulary` for
the added tokens."""
