"""Provider-level differential privacy of the track-2 baselines.

``mechanism`` holds the maths as free functions on plain tensors (provider sampling, clipping,
Gaussian noise), tested on their own; ``plan`` turns a run's options and the federation's data
into the mechanism's parameters (calibrated noise) and the ``privacy.json`` declaration.
"""
