"""The privacy declaration (``privacy.json``): validation of an untrusted, already-parsed object.

Keys (docs/design.md): ``epsilon``, ``delta``, ``noise_multiplier``, ``clipping_norm``,
``rounds``, ``clients``, ``clients_per_round``, ``providers_per_round``, ``min_providers``,
``sampling`` ("poisson" | "fixed"), ``analysis`` ("competition" | "strict"), ``unit``
("provider"). Every error is a ``DeclarationError`` that names the offending field.

Reading the file is not done here: the accountant imports nothing else of the kit, and the file
has one reader and one writer, ``benchmark.privacy_file`` (the benchmark's strict JSON reader,
then this validation), used by ``baselines.privacy.declaration_file`` (``pflkit dp verify``) and
``evaluator.validation.privacy``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from accountant.federated import ANALYSES, SAMPLINGS

MAX_ROUNDS = 1_000_000
UNITS = ("provider",)
FIELDS = (
    "epsilon",
    "delta",
    "noise_multiplier",
    "clipping_norm",
    "rounds",
    "clients",
    "clients_per_round",
    "providers_per_round",
    "min_providers",
    "sampling",
    "analysis",
    "unit",
)


class DeclarationError(ValueError):
    """An invalid privacy declaration.

    Attributes:
        field: the offending key ("" for problems with the file as a whole).
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


def _key(help: str, rule: str) -> Any:
    """A key of privacy.json as a field of ``PrivacyDeclaration``: what it holds and the rule its
    value must follow, which the files reference (docs/reference/files.md) shows.

    Args:
        help: what the key holds.
        rule: what :func:`parse_declaration` and the evaluator require of its value.

    Returns:
        A ``dataclasses.field`` without a default, its ``metadata`` ``{"help", "rule"}``.
    """
    return field(metadata={"help": help, "rule": rule})


@dataclass(frozen=True)
class PrivacyDeclaration:
    """A validated privacy claim of one training run.

    Attributes:
        epsilon, delta: the claimed (epsilon, delta) budget per provider.
        noise_multiplier: noise standard deviation over the clipping norm.
        clipping_norm: L2 bound of one provider's update.
        rounds: federated rounds (steps of the mechanism); a float only when the file gave
            a non-integer, which verification reports and fails.
        clients, clients_per_round, providers_per_round, min_providers: the two-level sampling.
        sampling: "poisson" or "fixed".
        analysis: "competition" or "strict".
        unit: "provider".
        unknown_fields: keys present in the file but not part of the format (ignored).
    """

    epsilon: float = _key("the claimed epsilon per provider", "a finite number > 0")
    delta: float = _key(
        "the claimed delta",
        "in (0, 1); ranked only at or below 1e-5, and a delta above 1/N for the benchmark's N "
        "providers leaves the claim unverified",
    )
    noise_multiplier: float = _key(
        "the Gaussian noise's standard deviation over the clipping norm", "> 0"
    )
    clipping_norm: float = _key("S, the L2 bound of one provider's update", "> 0")
    rounds: int | float = _key(
        "federated rounds, the mechanism's steps",
        f"1 to {MAX_ROUNDS:,} (a non-integer is reported and fails); must be the log's rounds",
    )
    clients: int = _key("K", "a whole number >= 1; must be the benchmark's K")
    clients_per_round: int = _key(
        "M, the clients the server samples a round",
        ">= 1, at most `clients`; with `fixed` sampling every round of the log must have M "
        "clients, with `poisson` the log's mean may exceed M by 3 standard errors at most",
    )
    providers_per_round: int = _key(
        "m, the providers a sampled client samples",
        ">= 1, at most `min_providers` and the benchmark's smallest client's providers",
    )
    min_providers: int = _key(
        "N, the fewest providers held by any client", ">= 1; must be the benchmark's"
    )
    sampling: str = _key("`poisson` or `fixed`", "exact, case-sensitive")
    analysis: str = _key("`competition` (q = M/K x m/N) or `strict` (q = m/N)", "exact")
    unit: str = _key("`provider`", "exact")
    unknown_fields: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict:
        """The declaration as written in privacy.json (without ``unknown_fields``)."""
        data = asdict(self)
        data.pop("unknown_fields")
        return data


def parse_declaration(data: Mapping) -> PrivacyDeclaration:
    """Validate a parsed privacy.json object.

    Examples:
        >>> parse_declaration({"epsilon": 1, "delta": 1e-5, "noise_multiplier": 1.145,
        ...     "clipping_norm": 0.5, "rounds": 5, "clients": 10, "clients_per_round": 2,
        ...     "providers_per_round": 50, "min_providers": 400, "sampling": "poisson",
        ...     "analysis": "competition", "unit": "provider"}).rounds
        5

    Args:
        data: the JSON object (a mapping of the keys above).

    Returns:
        The validated declaration.

    Raises:
        DeclarationError: naming the first missing or invalid field.
    """
    if not isinstance(data, Mapping):
        raise DeclarationError(
            "", f"the declaration must be a JSON object; got {type(data).__name__}"
        )
    for key in FIELDS:
        if key not in data:
            raise DeclarationError(key, "missing; privacy.json needs: " + ", ".join(FIELDS))
    epsilon = _positive(data, "epsilon")
    delta = _number(data, "delta")
    if not 0 < delta < 1:
        raise DeclarationError("delta", f"must be in (0, 1), for example 1e-5; got {delta!r}")
    noise_multiplier = _positive(data, "noise_multiplier")
    clipping_norm = _positive(data, "clipping_norm")
    rounds = _rounds(data)
    clients = _count(data, "clients")
    clients_per_round = _count(data, "clients_per_round")
    min_providers = _count(data, "min_providers")
    providers_per_round = _count(data, "providers_per_round")
    if clients_per_round > clients:
        raise DeclarationError(
            "clients_per_round", f"{clients_per_round} exceeds clients ({clients}): rate above 1"
        )
    if providers_per_round > min_providers:
        raise DeclarationError(
            "providers_per_round",
            f"{providers_per_round} exceeds min_providers ({min_providers}): rate above 1",
        )
    return PrivacyDeclaration(
        epsilon=epsilon,
        delta=delta,
        noise_multiplier=noise_multiplier,
        clipping_norm=clipping_norm,
        rounds=rounds,
        clients=clients,
        clients_per_round=clients_per_round,
        providers_per_round=providers_per_round,
        min_providers=min_providers,
        sampling=_choice(data, "sampling", SAMPLINGS),
        analysis=_choice(data, "analysis", ANALYSES),
        unit=_choice(data, "unit", UNITS),
        unknown_fields=tuple(sorted(str(key) for key in data if key not in FIELDS)),
    )


def _number(data: Mapping, key: str) -> float:
    """A finite JSON number (bools refused)."""
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise DeclarationError(key, f"must be a number; got {value!r}")
    try:
        number = float(value)
    except OverflowError:
        raise DeclarationError(
            key, "must be a finite number; got one too large for a float"
        ) from None
    if not math.isfinite(number):
        raise DeclarationError(key, f"must be finite; got {value!r}")
    return number


def _positive(data: Mapping, key: str) -> float:
    """A finite number > 0."""
    number = _number(data, key)
    if not number > 0:
        raise DeclarationError(key, f"must be > 0; got {data[key]!r}")
    return number


def _count(data: Mapping, key: str) -> int:
    """An integer >= 1 (integral floats such as 10.0 accepted)."""
    number = _number(data, key)
    if not number.is_integer():
        raise DeclarationError(key, f"must be a whole number; got {data[key]!r}")
    if number < 1:
        raise DeclarationError(key, f"must be >= 1; got {data[key]!r}")
    return int(number)


def _rounds(data: Mapping) -> int | float:
    """Rounds >= 1; a non-integer is kept as a float so verification can report it."""
    number = _number(data, "rounds")
    if not number > 0:
        raise DeclarationError(
            "rounds", f"must be >= 1 (zero rounds spend nothing to verify); got {data['rounds']!r}"
        )
    if number > MAX_ROUNDS:
        raise DeclarationError(
            "rounds", f"above {MAX_ROUNDS} is not supported; got {data['rounds']!r}"
        )
    return int(number) if number.is_integer() else number


def _choice(data: Mapping, key: str, allowed: tuple[str, ...]) -> str:
    """One of ``allowed`` (exact, case-sensitive)."""
    value = data[key]
    if value not in allowed:
        raise DeclarationError(
            key, f"must be one of {', '.join(map(repr, allowed))}; got {value!r}"
        )
    return value
