"""The FSP presets: the ``fedavg`` preset after 10 federated pre-training rounds.

As in the pilot study (section 5.2): 10 pre-training rounds with the fine-tuning's clients per
round, all three objectives; ``fsp-fedadam`` pre-trains with FedAdam at the pilot's server
learning rate 1e-3 and epsilon (the kit's ``tau``) 1e-5, beta2 0.99 (the kit's default), and
fine-tunes with FedAvg. Other combinations are flags (``--fsp-strategy fedavgm``,
``--fsp-objectives tm``). The pilot's values were not tuned on the kit's tiny base.
"""

from __future__ import annotations

from typing import Any

#: name -> preset data, each extending a kit preset (see :mod:`baselines.presets`).
FSP_PRESETS: dict[str, dict[str, Any]] = {
    "fsp-fedavg": {"extends": "fedavg", "fsp_rounds": 10},
    "fsp-fedadam": {"extends": "fedavg", "fsp_rounds": 10, "fsp_strategy": "fedadam",
                    "fsp_server_lr": 1e-3, "tau": 1e-5},
}
