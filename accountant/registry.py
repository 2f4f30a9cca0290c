"""Accountants by name. Classes are imported on first use so the registry itself is light."""

from __future__ import annotations

import importlib

from accountant.base import PrivacyAccountant

AUTHORITATIVE = "rdp"
_ACCOUNTANTS: dict[str, str] = {
    "rdp": "accountant.rdp:RDPAccountant",
    "prv": "accountant.prv:PRVAccountant",
    "pld": "accountant.pld:PLDAccountant",
}


def accountant_names() -> tuple[str, ...]:
    """Registered names, the authoritative RDP accountant first."""
    return tuple(_ACCOUNTANTS)


def register_accountant(name: str, target: str, *, force: bool = False) -> None:
    """Register ``target`` (``"module:Class"``) under ``name``.

    Raises:
        ValueError: when ``name`` is taken and ``force`` is false.
    """
    if name in _ACCOUNTANTS and not force:
        raise ValueError(f"an accountant named {name!r} is already registered; pass force=True")
    _ACCOUNTANTS[name] = target


def accountant_class(name: str) -> type[PrivacyAccountant]:
    """The class registered under ``name``.

    Raises:
        ValueError: when ``name`` is unknown; the message lists the known names.
    """
    try:
        target = _ACCOUNTANTS[name]
    except KeyError:
        known = ", ".join(_ACCOUNTANTS)
        raise ValueError(f"unknown accountant {name!r}; choose one of: {known}") from None
    module_name, _, class_name = target.partition(":")
    return getattr(importlib.import_module(module_name), class_name)


def create_accountant(name: str) -> PrivacyAccountant:
    """A fresh accountant of the kind registered under ``name``.

    Raises:
        ValueError: when ``name`` is unknown.
    """
    return accountant_class(name)()
