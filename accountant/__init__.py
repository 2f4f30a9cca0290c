"""Privacy accounting for provider-level DP in federated Document VQA.

Imports nothing else of the kit. Names are loaded lazily (PEP 562) so that importing the
package, or its command group, does not pull in opacus and torch.

>>> from accountant import compute_epsilon
>>> round(compute_epsilon(noise_multiplier=0.637, sample_rate=0.025, steps=5, delta=1e-5)[0], 4)
3.9959
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "SampledGaussian": "accountant.mechanism",
    "exact_steps": "accountant.mechanism",
    "steps_for_epochs": "accountant.mechanism",
    "PrivacyAccountant": "accountant.base",
    "RDPAccountant": "accountant.rdp",
    "PRVAccountant": "accountant.prv",
    "PLDAccountant": "accountant.pld",
    "create_accountant": "accountant.registry",
    "register_accountant": "accountant.registry",
    "accountant_names": "accountant.registry",
    "compute_epsilon": "accountant.analysis.rdp",
    "estimate_epsilons": "accountant.cross_check",
    "get_noise_multiplier": "accountant.calibration",
    "federated_sample_rate": "accountant.federated",
    "PrivacyDeclaration": "accountant.declaration",
    "DeclarationError": "accountant.declaration",
    "parse_declaration": "accountant.declaration",
    "VerificationReport": "accountant.report",
    "verify": "accountant.verification",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'accountant' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
