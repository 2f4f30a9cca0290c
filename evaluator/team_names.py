"""Team names: normalised, validated and compared in one place (API and CLI alike).

A name is normalised (Unicode NFKC, surrounding spaces trimmed, inner runs of spaces made one)
and must then start with a letter or digit and hold only letters, digits, spaces, ``.``, ``_``
and ``-``: no markup, and no leading ``=``, ``+``, ``-`` or ``@`` that a spreadsheet would run.
Two names are the same team when their keys are equal: the key is the confusable skeleton of the
case-folded name (each character replaced by one representative of its Unicode confusables, as
listed by ``confusable_homoglyphs``), so ``alice``, ``Alice``, ``аlice`` (Cyrillic a) and
``alice `` are one team.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

MAX_CHARS = 64
_SPACES = re.compile(r"\s+")


class InvalidTeamName(ValueError):
    """A team name that cannot be registered; the message says what to change."""


def normalise(raw: str) -> str:
    """The registered form of a team name.

    Args:
        raw: the name as typed.

    Returns:
        The name after NFKC, trimming and collapsing inner spaces.

    Raises:
        InvalidTeamName: empty, too long, or holding characters other than letters, digits,
            spaces, ``.``, ``_`` and ``-``, or not starting with a letter or digit.
    """
    name = _SPACES.sub(" ", unicodedata.normalize("NFKC", raw)).strip()
    if not name:
        raise InvalidTeamName("the team name is empty; give a name such as 'ocr-lab'")
    if len(name) > MAX_CHARS:
        raise InvalidTeamName(f"the team name has {len(name)} characters; at most {MAX_CHARS}")
    if not _is_alphanumeric(name[0]):
        raise InvalidTeamName(
            f"the team name must start with a letter or digit, not {name[0]!r}"
        )
    for char in name:
        if not (_is_alphanumeric(char) or char in " ._-"):
            raise InvalidTeamName(
                f"the team name holds {char!r}; use letters, digits, spaces, '.', '_' and '-'"
            )
    return name


def key(name: str) -> str:
    """The comparison key of a (normalised) name: its case-folded confusable skeleton.

    Args:
        name: a team name.

    Returns:
        A string equal for names a reader could mistake for one another.
    """
    folded = _SPACES.sub(" ", unicodedata.normalize("NFKC", name)).strip().casefold()
    return "".join(_representative(char) for char in folded)


def _is_alphanumeric(char: str) -> bool:
    """A Unicode letter or digit (categories L* and N*)."""
    return unicodedata.category(char)[0] in "LN"


@lru_cache(maxsize=4096)
def _representative(char: str) -> str:
    """One fixed member of ``char``'s confusable set (the smallest code point, ASCII first)."""
    members = {char}
    for entry in _confusables().get(char, ()):
        if len(entry["c"]) == 1:
            members.add(entry["c"].casefold() if len(entry["c"].casefold()) == 1 else entry["c"])
    return min(members, key=lambda c: (not c.isascii(), ord(c[0])))


@lru_cache(maxsize=1)
def _confusables() -> dict[str, list[dict[str, str]]]:
    """Unicode's confusables table as shipped by ``confusable_homoglyphs``."""
    from confusable_homoglyphs.utils import load

    return load("confusables.json")
