"""Track 2's noise floor applied to a submission: the declared noise must be in the checkpoint.

The bound and its derivation are :mod:`accountant.noise_floor`'s. This module gathers its inputs
from what the evaluator holds, never from figures only the participant states where the
benchmark knows better:

- **Coordinates.** The tensors the clients' uplink messages carried in full (the detailed log,
  :mod:`evaluator.validation.commdetails`), under the checkpoint's names; their change from
  the organisers' reference checkpoint is read in float64. Tensors that travelled only as LoRA
  factors are merged into their layer and are not covered (their factors' noise is not visible
  in the merged weight); a submission none of whose communicated tensors is in the checkpoint
  is refused (nothing to check).
- **Rounds.** ``M_t``: the clients that sent an uplink message in each round of the log.
- **Mechanism.** sigma, S, m and the sampling from the verified ``privacy.json``; the sampled
  providers from the benchmark's ``data_points.json`` (fixed sampling: m per client; Poisson:
  at most every provider of each of the round's clients, and in all rounds together at most the
  binomial quantile at the rate m / N of the benchmark's fewest N, with half of ``alpha``).
- **Server step.** ``submission.json``'s ``server`` (``{"strategy", "lr", "momentum"}``, written
  by ``pflkit train``): a linear step (``fedavg`` or ``fedavgm``) is required, since an
  adaptive server optimiser transforms the noise non-linearly and has no floor here.
- **Wire.** Every uplink message in a lossless wire format (the format's declared
  ``lossless``, :class:`benchmark.wire_formats.base.WireFormat`: ``fp32``): a lossy format (NF4)
  quantises the noisy update, which the bound does not model.

A submission outside the band is an :class:`InvalidSubmission` naming the expected and
observed energies; the verdict's figures go into the privacy report.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from accountant.noise_floor import (
    DEFAULT_ALPHA,
    NoiseFloorVerdict,
    NoisyRounds,
    TensorChange,
    binomial_bound,
    check_noise_floor,
)
from benchmark.communication_log import SERVER, lora_adapted_module
from benchmark.wire_formats import UnknownWireFormat, wire_format
from evaluator.validation.binding import Reference
from evaluator.validation.commdetails import PART as DETAILS_PART
from evaluator.validation.commdetails import DetailedMessage
from evaluator.validation.errors import InvalidSubmission

#: server strategies whose step is linear in the clients' mean update.
LINEAR_STEPS = ("fedavg", "fedavgm")


def server_step(metadata: Mapping[str, Any]) -> tuple[str, float, float]:
    """The declared server step.

    Args:
        metadata: ``submission.json``.

    Returns:
        ``(strategy, eta, beta)``.

    Raises:
        InvalidSubmission: missing, non-linear, or with a learning rate or momentum out of range.
    """
    server = metadata.get("server")
    hint = ('submission.json needs "server": {"strategy": "fedavg" or "fedavgm", "lr": the '
            'server learning rate, "momentum": 0 for fedavg} (pflkit train writes it)')  # fmt: skip
    if not isinstance(server, Mapping):
        raise InvalidSubmission("metadata", f"server: missing; {hint}")
    strategy, lr, momentum = server.get("strategy"), server.get("lr"), server.get("momentum", 0)
    if strategy not in LINEAR_STEPS:
        raise InvalidSubmission(
            "metadata", f"server.strategy {str(strategy)[:40]!r}: track 2's noise floor needs a "
            f"server step linear in the noisy updates ({' or '.join(LINEAR_STEPS)}); an adaptive "
            "server optimiser is not covered",
        )  # fmt: skip
    for key, value, low, high in (("lr", lr, 0.0, math.inf), ("momentum", momentum, 0.0, 1.0)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not (
            (low < value < high) if key == "lr" else (low <= value < high)
        ):
            raise InvalidSubmission("metadata", f"server.{key} {value!r} is out of range; {hint}")
    if strategy == "fedavg" and momentum != 0:
        raise InvalidSubmission("metadata", "server.momentum must be 0 for fedavg")
    return str(strategy), float(lr), float(momentum)


def client_providers(data_dir: Path | None) -> dict[int, int]:
    """Providers each client holds, from the benchmark's ``data_points.json``.

    Args:
        data_dir: the benchmark directory.

    Returns:
        client -> providers (empty when the benchmark lists none).
    """
    if data_dir is None:
        return {}
    for candidate in (Path(data_dir) / "participant" / "data_points.json",
                      Path(data_dir) / "data_points.json"):  # fmt: skip
        if candidate.is_file():
            points = json.loads(candidate.read_text())
            return {int(name.removeprefix("client_")): len(providers)
                    for name, providers in points.items()
                    if name.startswith("client_") and isinstance(providers, dict)}  # fmt: skip
    return {}


def uplink_rounds(messages: Sequence[DetailedMessage]) -> tuple[list[list[int]], set[str]]:
    """The clients of each round's uplink and the tensor names they carried in full.

    Args:
        messages: the detailed log.

    Returns:
        (clients per round in round order, names of the tensors sent in full).

    Raises:
        InvalidSubmission: an uplink message in a lossy (or unknown) wire format.
    """
    rounds: dict[int, set[int]] = {}
    names: set[str] = set()
    carried = False
    for message in messages:
        round_, sender, _, _ = message.row
        if sender == SERVER:
            continue
        if not _lossless(message):
            raise InvalidSubmission(
                DETAILS_PART, f"{message.describe()} is in {message.format!r}: track 2's noise "
                "floor is defined for fp32 uplink messages and other lossless wire formats (a "
                "lossy format's quantisation of the noisy update is not modelled); send the "
                "updates in fp32",
            )  # fmt: skip
        rounds.setdefault(round_, set()).add(sender)
        carried = carried or bool(message.parameters)
        names.update(name for name in message.parameters if lora_adapted_module(name) is None)
    if rounds and not carried:
        raise InvalidSubmission(
            DETAILS_PART, "no client message carried a tensor: the declared noise has nowhere "
            "to be; a track-2 run's clients send their noisy updates (the detailed log names "
            "the tensors of each message)",
        )  # fmt: skip
    return [sorted(rounds[r]) for r in sorted(rounds)], names


def _lossless(message: DetailedMessage) -> bool:
    """Whether a message's wire format declares itself lossless (an unknown one does not)."""
    try:
        return wire_format(message.format).lossless
    except UnknownWireFormat:
        return False


def tensor_changes(checkpoint: Path, reference: Reference, names: set[str],
                   rounds: int) -> dict[str, TensorChange]:  # fmt: skip
    """The change from the base of the named tensors (file names), with their rounding bound.

    Args:
        checkpoint: the submitted ``model.safetensors`` (validated against the spec).
        reference: the reference checkpoint.
        names: tensor names of the detailed log.
        rounds: T (each server step and the final save round every value once).

    Returns:
        file name -> its change.
    """
    import torch

    from benchmark.model.tensor_file import TensorFile

    files = sorted({reference.file_names.get(name, name) for name in names} & set(reference.spec))
    changes: dict[str, TensorChange] = {}
    with TensorFile(reference.checkpoint) as base, TensorFile(checkpoint) as submitted:
        for name in files:
            after = submitted.get_tensor(name)
            before = base.get_tensor(name).to(torch.float64)
            wide = after.to(torch.float64)
            eps = torch.finfo(after.dtype).eps if after.dtype.is_floating_point else 0.0
            changes[name] = TensorChange(
                values=after.numel(),
                energy=float(torch.sum((wide - before) ** 2)),
                rounding=(rounds + 1) * eps / 2 * float(torch.linalg.vector_norm(wide)),
            )
    return changes


def check_submission(
    checkpoint: Path,
    reference: Reference,
    metadata: Mapping[str, Any],
    declaration: Any,
    messages: Sequence[DetailedMessage],
    *,
    data_dir: Path | None,
    alpha: float = DEFAULT_ALPHA,
) -> dict[str, Any]:
    """Apply the noise floor to a track-2 submission.

    Args:
        checkpoint: the submitted ``model.safetensors``.
        reference: the organisers' reference checkpoint.
        metadata: ``submission.json``.
        declaration: the validated ``privacy.json`` (``accountant.declaration``).
        messages: the detailed log, matched to the CSV.
        data_dir: the benchmark directory (providers per client).
        alpha: the false-alarm probability on an honest run of the declared mechanism.

    Returns:
        The verdict's figures (``NoiseFloorVerdict.to_dict``) with the inputs used.

    Raises:
        InvalidSubmission: the change lies outside the band, or the floor cannot be applied
            (server step, wire format, nothing communicated in the checkpoint).
    """
    clients, names = uplink_rounds(messages)
    strategy, lr, momentum = server_step(metadata)
    if not clients:
        raise InvalidSubmission(DETAILS_PART, "no client sent an update: there is no noise to check")
    changes = tensor_changes(checkpoint, reference, names, len(clients))
    if not changes:
        raise InvalidSubmission(
            "model", "none of the tensors the clients sent is in the checkpoint as such (only "
            "LoRA factors travelled): track 2's noise floor cannot be checked on the merged "
            "weights; send at least one tensor in full",
        )  # fmt: skip
    providers = client_providers(data_dir)
    per_client = int(declaration.providers_per_round)
    fixed = declaration.sampling == "fixed"
    most = [sum(per_client if fixed else providers.get(c, per_client) for c in round_clients)
            for round_clients in clients]  # fmt: skip
    total, budget = None, alpha
    if not fixed and providers:
        # Poisson: each provider at rate m / N (N the benchmark's fewest), independently; half
        # the false-alarm budget goes to this bound, half to the energy bands.
        rate = per_client / min(providers.values())
        total = binomial_bound(sum(most), rate, alpha / 2)
        alpha = alpha / 2
    rounds = NoisyRounds(
        noise_multiplier=float(declaration.noise_multiplier),
        clipping_norm=float(declaration.clipping_norm), providers_per_round=per_client,
        clients=[len(c) for c in clients], max_providers=most,
        server_lr=lr, server_momentum=momentum, providers_total=total,
    )  # fmt: skip
    verdict: NoiseFloorVerdict = check_noise_floor(changes, rounds, alpha=alpha)
    report = {
        **verdict.to_dict(),
        "server": {"strategy": strategy, "lr": lr, "momentum": momentum},
        "rounds": len(clients), "noise_std_per_value": math.sqrt(rounds.noise_variance()),
        "signal_bound": rounds.signal_bound(), "tensors": len(changes),
        "providers_bound": total if total is not None else sum(most), "alpha": budget,
    }  # fmt: skip
    if not verdict.passed:
        raise InvalidSubmission(
            "model", "the checkpoint does not carry the noise the privacy declaration implies "
            f"(noise multiplier {declaration.noise_multiplier:g}, clipping norm "
            f"{declaration.clipping_norm:g}, {per_client} providers per client, server "
            f"{strategy} lr {lr:g}): {verdict.problems[0]}"
            + (f" (and {len(verdict.problems) - 1} more)" if len(verdict.problems) > 1 else "")
            + f". The false-alarm rate of this check on an honest run is at most {budget:g}",
        )  # fmt: skip
    return report
