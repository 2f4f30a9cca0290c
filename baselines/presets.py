"""Named recipes that reproduce the competition's track-1 baselines at the kit's scale.

- ``fedavg``: the organisers' baseline: everything but the visual encoder trained and sent in
  fp32, 2 of 10 clients per round, 1 local epoch, AdamW lr 2e-4 with torch's default weight
  decay 0.01 (the official ``build_optimizer``), 10 rounds. The presets that extend it (FedProx,
  FedP3, pFedCR, the FSP presets) and the track-3 ``fedavg-ft`` and ``local-only`` (the same
  recipe) have that decay too; the LoRA presets are the kit's own recipes and keep 0.
- ``lora``: the winner's method at the kit's scale: LoRA adapters, spatial embedding and visual
  projection trained fully, 2 clients per round. The winner put rank 6 on the T5 ``q`` and ``v``
  projections of a base that was already close to its fine-tuned accuracy; the tiny base gains
  0.105 val ANLS from full fine-tuning on ``mini``, and adapters on ``q`` and ``v`` alone do not
  carry that (0.333 after 7 rounds and 0.332 after 10, from 0.324). So the preset puts rank 2
  on every linear layer of the language backbone (``q k v o wi wo``, 32x fewer bytes per
  message than ``fedavg``) at lr 3e-3, for 20 rounds (docs/participants/baselines.md).
- ``lora-1client``: the same with 1 client per round and 16 local epochs, 2 rounds.
- ``lora-nf4``: ``lora-1client`` with every message NF4-quantised on the wire.

Track 2 (provider-level DP, :data:`DP_PRESETS`; ``--epsilon`` or ``--noise-multiplier`` required):

- ``dp-fedavg``: FL-GROUP-DP, the organisers' DP baseline: full fine-tuning as ``fedavg`` (AdamW
  weight decay 0.01 as the official code), 2 of 10 clients, 5 rounds, clipping norm 0.5, delta 1e-5, Poisson provider sampling at 50/400 of the
  fewest providers at a client, unweighted server mean.
- ``dp-lora``: the track-2 winner's recipe: the same mechanism on LoRA r=6 on ``q`` and ``v``, 30 rounds.

Both DP presets apply the averaged noisy update with a server learning rate of 0.05. The noise
on each coordinate is sigma x S / m, with m the expected providers sampled at a client: the
competition sampled about 50, a ``mini`` client holds 12 to 18 providers so m = 2, and at
server learning rate 1 that noise (0.12 to 0.30 per coordinate and round) wiped out the tiny
model at every epsilon (val ANLS 0.0). The privacy guarantee does not depend on it.

Track 2 at the competition's federation size (:data:`DP_COMPETITION_PRESETS`, for the ``dp``
scale, where every client holds 400 to 429 providers; on ``mini`` the 50 providers per round
exceed a client's providers and the run is refused):

- ``dp-fedavg-competition``: the organisers' FL-GROUP-DP as published: 2 of 10 clients, 50
  providers per client per round (rate 0.2 x 50/400 = 0.025), S = 0.5, 5 rounds.
- ``dp-lora-competition``: the track-2 winner's public code: 30 rounds, 45 providers per client
  (rate 0.0225), S = 0.5, LoRA rank 16 on ``q`` and ``v``.

Both apply the noisy mean at server learning rate 1, as the competition did: at m = 45-50 the
noise on a coordinate is sigma x S / m = 0.005 to 0.013, not ``mini``'s 0.12 to 0.30.

- ``fsp-fedavg``, ``fsp-fedadam``: ``fedavg`` after 10 rounds of federated self-pretraining on the
  clients' pages (:mod:`baselines.fsp`), the second with FedAdam on the server while pre-training.

A preset is data: the method, strategy and local optimiser by name, the run's shape, and any
option key of those components (:mod:`baselines.options`). Command-line options override it
key by key. A method file may bring its own presets (``Method.presets``); they are added here,
to :data:`PRESETS`, to :data:`DP_PRESETS` for a private method or to :data:`PERSONAL_PRESETS`
for a personal one.
"""

from __future__ import annotations

from typing import Any

from baselines.config import TrainConfig
from baselines.fsp.presets import FSP_PRESETS
from baselines.methods import METHODS
from baselines.optimizers import OPTIMIZERS
from baselines.optimizers.adamw import OFFICIAL_WEIGHT_DECAY
from benchmark.tracks import PRIVACY

#: What the three track-1 LoRA presets share: adapters on every linear layer of the backbone.
_KIT_SCALE_LORA: dict[str, Any] = {
    "method": "lora",
    "strategy": "fedavg",
    "optimizer": "adamw",
    "lr": 3e-3,
    "lora_rank": 2,
    "lora_targets": ("q", "k", "v", "o", "wi", "wo"),
    "wire": "fp32",
}

PRESETS: dict[str, dict[str, Any]] = {
    "fedavg": {
        "method": "full",
        "strategy": "fedavg",
        "optimizer": "adamw",
        "rounds": 10,
        "clients_per_round": 2,
        "local_epochs": 1,
        "lr": 2e-4,
        "weight_decay": OFFICIAL_WEIGHT_DECAY,
        "wire": "fp32",
    },
    "lora": {**_KIT_SCALE_LORA, "rounds": 20, "clients_per_round": 2, "local_epochs": 1},
    "lora-1client": {**_KIT_SCALE_LORA, "rounds": 2, "clients_per_round": 1, "local_epochs": 16},
    "lora-nf4": {
        **_KIT_SCALE_LORA, "rounds": 2, "clients_per_round": 1, "local_epochs": 16, "wire": "nf4",
    },
}


#: What both DP presets share: the provider-level mechanism and the damped server step.
_DP_MECHANISM: dict[str, Any] = {
    "clients_per_round": 2,
    "local_epochs": 1,
    "wire": "fp32",
    "strategy": "fedavg",
    "optimizer": "adamw",
    "weighted": False,
    "delta": PRIVACY.delta,
    "clipping_norm": 0.5,
    "provider_sampling": "poisson",
    "privacy_analysis": "competition",
    "server_lr": 0.05,
}

DP_PRESETS: dict[str, dict[str, Any]] = {
    "dp-fedavg": {**_DP_MECHANISM, "method": "dp-fedavg", "rounds": 5, "lr": 2e-4,
                  "weight_decay": OFFICIAL_WEIGHT_DECAY},
    "dp-lora": {**_DP_MECHANISM, "method": "dp-lora", "rounds": 30, "lr": 1e-3, "lora_rank": 6},
}


def _resolved(preset: dict[str, Any]) -> dict[str, Any]:
    """A method's preset with the data of the preset it ``extends`` under it."""
    if "extends" not in preset:
        return preset
    base = {**PRESETS, **DP_PRESETS}.get(preset["extends"])
    if base is None:
        raise ValueError(f"a preset extends {preset['extends']!r}, which is no kit preset")
    return {**base, **{key: value for key, value in preset.items() if key != "extends"}}


#: Track 2 at the competition's federation size (the ``dp`` scale): the mini presets' mechanism
#: with the competition's providers per round, rounds and server step.
DP_COMPETITION_PRESETS: dict[str, dict[str, Any]] = {
    name: _resolved(preset) for name, preset in {
        "dp-fedavg-competition": {
            "extends": "dp-fedavg", "rounds": 5, "clients_per_round": 2,
            "providers_per_round": 50, "clipping_norm": 0.5, "server_lr": 1.0,
        },
        "dp-lora-competition": {
            "extends": "dp-lora", "rounds": 30, "clients_per_round": 2,
            "providers_per_round": 45, "clipping_norm": 0.5, "server_lr": 1.0,
            "lora_rank": 16, "lora_targets": ("q", "v"),
        },
    }.items()
}

#: Track 3 (personalisation): presets of methods with ``personal = True`` (``fedavg-ft``,
#: ``local-only``, :mod:`baselines.methods.finetune`).
PERSONAL_PRESETS: dict[str, dict[str, Any]] = {}

for _method in METHODS.values():
    if _method.private:
        _group = DP_PRESETS
    elif _method.personal:
        _group = PERSONAL_PRESETS
    else:
        _group = PRESETS
    _group.update({name: _resolved(preset) for name, preset in _method.presets.items()})

#: Track 1 after federated self-pretraining (:mod:`baselines.fsp.presets`), apart from
#: :data:`PRESETS` because their logs open with the pre-training rounds.
PRETRAINING_PRESETS: dict[str, dict[str, Any]] = {
    name: _resolved(preset) for name, preset in FSP_PRESETS.items()
}


def all_presets() -> dict[str, dict[str, Any]]:
    """Every preset, track 1 (with pre-training last), then track 2 (at the competition's
    federation size last), then track 3."""
    return {**PRESETS, **PRETRAINING_PRESETS, **DP_PRESETS, **DP_COMPETITION_PRESETS,
            **PERSONAL_PRESETS}


def preset_config(name: str, **overrides: Any) -> TrainConfig:
    """The configuration of a preset with some fields or options overridden.

    Args:
        name: a key of :data:`PRESETS`, :data:`PRETRAINING_PRESETS`, :data:`DP_PRESETS`,
            :data:`DP_COMPETITION_PRESETS` or :data:`PERSONAL_PRESETS`.
        **overrides: :class:`TrainConfig` fields or option keys to change (``None`` values are
            ignored, so unset command-line options keep the preset's value).

    Returns:
        The validated configuration.

    Raises:
        ValueError: for an unknown preset or an invalid option.
    """
    presets = all_presets()
    if name not in presets:
        raise ValueError(f"unknown preset {name!r}; choose one of {sorted(presets)}")
    values = _without_optimizer_keys(dict(presets[name]), overrides.get("optimizer"))
    values.update({key: value for key, value in overrides.items() if value is not None})
    return TrainConfig.from_values({**values, "preset": name})


def _without_optimizer_keys(preset: dict[str, Any], optimizer: str | None) -> dict[str, Any]:
    """The preset without its own optimiser's option keys when ``optimizer`` replaces it
    (``dp-clgecl --optimizer adamw`` drops the preset's ``momentum``, which AdamW does not take)."""
    if optimizer is None or optimizer == preset.get("optimizer") or optimizer not in OPTIMIZERS:
        return preset
    from baselines.config import run_option_specs

    own = run_option_specs(OPTIMIZERS[preset.get("optimizer", "adamw")])
    replacing = run_option_specs(OPTIMIZERS[optimizer])
    return {key: value for key, value in preset.items() if key not in own or key in replacing}
