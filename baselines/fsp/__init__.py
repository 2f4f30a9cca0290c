"""Federated self-pretraining (FSP): denoising pre-training on the clients' own pages, federated,
before fine-tuning (pilot study, section 3.3). ``pflkit train --fsp-rounds N`` runs it. This
package holds the method's parts, which the run's configuration reads (its options, objectives,
added tokens, encoding, presets); the phase that runs them on the engine, and its log, is
:mod:`baselines.fsp_phase`. See :mod:`baselines.fsp.vocabulary` for the added tokens."""
