"""Component options: each method, strategy and optimiser declares its own, as data.

A component (a :class:`~baselines.methods.base.Method`, a
:class:`~baselines.strategies.base.Strategy`, an :class:`~baselines.optimizers.base.Optimizer`)
lists its options as frozen dataclasses in ``option_classes``. Each field declares its help in
its metadata, as ``dataclasses.field(default=..., metadata={"help": ...})`` does (peft's and
transformers' argument classes); :func:`option` is the short form, and also says where the
command line differs from the field's name. ``pflkit train --help`` shows that help, and
:func:`option_specs` refuses a field that declares none. Every option has a *key*, unique across
the kit, which is the name a preset and ``TrainConfig.options`` use (``lora_rank``,
``server_lr``, ``epsilon``) and from which its command-line flag is spelled.

A component's options are rebuilt from the keys it owns by :func:`build_options`, so its own
validation (``__post_init__``) runs on every configuration, with an error that names the flag.

Discovery (:func:`benchmark.discovery.discover`, imported here as ``discover``) imports every
module of a package and collects the component classes defined there, so a new method, strategy
or optimiser is one new file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from benchmark.discovery import discover

__all__ = ["OptionSpec", "build_options", "discover", "option", "option_keys", "option_specs"]

T = TypeVar("T")


def option(
    default: Any = dataclasses.MISSING,
    *,
    help: str,
    key: str | None = None,
    flag: str | None = None,
    negate: bool = False,
    choices: tuple[str, ...] | None = None,
) -> Any:
    """A dataclass field of an options class: its help and, where it differs, its command line.

    Args:
        default: the field's default value.
        help: what ``pflkit train --help`` says of the option.
        key: the option's kit-wide key (default: the class's ``key_prefix`` + the field name).
        flag: the command-line flag (default: ``--`` + the key with dashes).
        negate: the flag is a switch that sets the field to ``False`` (``--unweighted``).
        choices: the allowed values of a string option.

    Returns:
        A ``dataclasses.field``.
    """
    metadata = {"help": help, "key": key, "flag": flag, "negate": negate, "choices": choices}
    return dataclasses.field(default=default, metadata=metadata)


@dataclass(frozen=True)
class OptionSpec:
    """One option as the command line and the configuration see it.

    Attributes:
        key: kit-wide key (``lora_rank``).
        field: the field of the options class (``rank``).
        owner: the options class.
        flag: command-line flag (``--lora-rank``).
        kind: ``int``, ``float``, ``str``, ``csv`` (tuple of names) or ``switch``.
        help: the description the field declares (its metadata's ``help``).
        negate: a switch that sets the field to ``False``.
        choices: allowed values of a string option.
    """

    key: str
    field: str
    owner: type
    flag: str
    kind: str
    help: str
    negate: bool = False
    choices: tuple[str, ...] | None = None

    def to_field(self, value: Any) -> Any:
        """The field value of a command-line value (a switch given means ``not negate``)."""
        if self.kind == "switch":
            return not self.negate if value else self.negate
        return value


def _kind(annotation: str) -> str:
    """The command-line kind of a field annotation (strings under postponed evaluation)."""
    text = str(annotation)
    if "tuple" in text:
        return "csv"
    if text.startswith("bool"):
        return "switch"
    for kind in ("int", "float", "str"):
        if text.startswith(kind):
            return kind
    raise TypeError(
        f"options field of type {text!r} has no command-line form; use int, float, "
        "str, bool or tuple[str, ...]"
    )


def _help(cls: type, field: dataclasses.Field) -> str:
    """The help a field declares in its metadata.

    Raises:
        TypeError: when the field declares none.
    """
    text = field.metadata.get("help")
    if not isinstance(text, str) or not text.strip():
        raise TypeError(
            f"option {cls.__name__}.{field.name} declares no help: declare it as "
            f'{field.name} = option(DEFAULT, help="...") (baselines.options.option) or '
            'dataclasses.field(default=..., metadata={"help": "..."})'
        )
    return text


def option_specs(cls: type) -> list[OptionSpec]:
    """The options of an options class, in field order.

    Args:
        cls: a frozen dataclass, optionally with a ``key_prefix`` class attribute.

    Returns:
        One spec per field.

    Raises:
        TypeError: when ``cls`` is not a dataclass, or a field has no command-line form or
            declares no help.
    """
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls.__name__} is not a dataclass; options classes are dataclasses")
    prefix = getattr(cls, "key_prefix", "")
    specs = []
    for field in dataclasses.fields(cls):
        meta = field.metadata
        key = meta.get("key") or prefix + field.name
        specs.append(
            OptionSpec(
                key=key,
                field=field.name,
                owner=cls,
                flag=meta.get("flag") or "--" + key.replace("_", "-"),
                kind=_kind(field.type),
                help=_help(cls, field),
                negate=bool(meta.get("negate")),
                choices=meta.get("choices"),
            )
        )
    return specs


def build_options(cls: type[T], values: Mapping[str, Any]) -> T:
    """An options object from the kit-wide keys it owns (others are left for other classes).

    Args:
        cls: the options class.
        values: key -> value (lists become tuples).

    Returns:
        The validated options object.
    """
    chosen = {
        spec.field: tuple(values[spec.key])
        if isinstance(values[spec.key], list)
        else values[spec.key]
        for spec in option_specs(cls)
        if spec.key in values
    }
    return cls(**chosen)


def option_keys(classes: Iterable[type]) -> set[str]:
    """The keys of every field of the given options classes."""
    return {spec.key for cls in classes for spec in option_specs(cls)}
