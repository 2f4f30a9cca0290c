"""The figures a scored submission has, declared as data: the ones every track shares and
each track's own.

A [Figure][] says what a result is (its name, its kind), how the public sees it (its heading,
the decimals it is published with, where it is shown) and how the evaluator's worker computes
it. [SHARED_FIGURES][] are every submission's results (the test scores, the communication
tally, the privacy claim, the audit), each a column of the evaluator's ``submissions`` table;
a track's own figures are ``benchmark.tracks.Track.figures``, stored by name in the
evaluator's ``submission_figures`` table, so a track with a figure of its own needs no
migration. The evaluator's API schema, the leaderboard's rows, tables and exports and the
public rounding read these declarations.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

#: Decimals of a score in the public views: as the competition published them. More would let
#: repeated submissions probe single hidden answers; the organisers see full precision.
PUBLIC_DECIMALS = 4

FigureKind = Literal["float", "int", "bool", "text", "json"]
KINDS: tuple[str, ...] = ("float", "int", "bool", "text", "json")
#: the Python type of each kind's values (``json``: any JSON value).
PYTHON_TYPES: dict[str, Any] = {"float": float, "int": int, "bool": bool, "text": str, "json": Any}


class Shown(enum.StrEnum):
    """Where a figure is shown, widest first; each place also shows what the places after it
    show of a submission it shows."""

    #: the leaderboard: its ranking rows (tables, JSON and CSV exports for scalar figures,
    #: plots), the public summary page and the API.
    BOARD = "board"
    #: the public summary page of a submission and the API, not the leaderboard's tables.
    PAGE = "page"
    #: organiser-only in public: the submission's team sees it in the API, the organisers
    #: everywhere; never the public pages or the leaderboard.
    TEAM = "team"


@dataclass(frozen=True)
class Figure:
    """One result of a scored submission.

    Attributes:
        name: its key everywhere (database, API, leaderboard row, exports), a Python
            identifier.
        kind: ``float``, ``int``, ``bool``, ``text`` or ``json`` (a list or mapping).
        label: its heading on the pages (default: the name with spaces).
        short: its heading in plain-text tables, at most 7 characters (default: the label's).
        description: a sentence for the API schema.
        decimals: the decimals it is published with (public and team views; the organisers see
            full precision); ``None``: shown as computed.
        rounded_keys: for a ``json`` list of mappings, the keys of each entry that are
            rounded to ``decimals``.
        shown: where it is shown ([Shown][]).
        better: ``higher`` or ``lower`` when a track may rank on it: which end ranks first.
        compute: how the worker computes it from its test scores (``evaluator.scoring.TestScores``:
            ``anls``, ``accuracy``, ..., ``personal``, the track-3 ``PersonalisedResult``): a
            dotted attribute path (``personal.worst_anls``) or a function of the scores;
            ``None`` for a figure a part's scoring step returns, or a shared one the worker
            sets itself.
    """

    name: str
    kind: FigureKind = "float"
    label: str = ""
    short: str = ""
    description: str = ""
    decimals: int | None = None
    rounded_keys: tuple[str, ...] = ()
    shown: Shown = Shown.BOARD
    better: Literal["higher", "lower"] | None = None
    compute: str | Callable[[Any], Any] | None = None

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"figure {self.name!r}: a figure's name is a Python identifier")
        if self.kind not in KINDS:
            raise ValueError(f"figure {self.name}: kind {self.kind!r} is not one of {KINDS}")
        if self.decimals is not None and self.kind not in ("float", "json"):
            raise ValueError(f"figure {self.name}: only float and json figures are rounded")
        if self.rounded_keys and self.kind != "json":
            raise ValueError(f"figure {self.name}: rounded_keys are for json figures")
        if self.better is not None and self.kind not in ("float", "int"):
            raise ValueError(f"figure {self.name}: only a number can rank ({self.kind})")

    @property
    def heading(self) -> str:
        """Its heading on the pages."""
        return self.label or self.name.replace("_", " ")

    @property
    def short_heading(self) -> str:
        """Its heading in plain-text tables (at most 7 characters)."""
        return (self.short or self.heading)[:7]

    @property
    def scalar(self) -> bool:
        """Whether it is one value (a table cell, a CSV column), not a JSON document."""
        return self.kind != "json"

    def best_first(self) -> str:
        """What ranking on it means, for titles: ``highest ANLS``, ``fewest bytes``.

        Raises:
            ValueError: a figure that cannot rank.
        """
        if self.better is None:
            raise ValueError(f"figure {self.name} declares no direction (better); it cannot rank")
        if self.better == "higher":
            return f"highest {self.heading}"
        return f"{'fewest' if self.kind == 'int' else 'lowest'} {self.heading}"

    def published(self, value: Any) -> Any:
        """The value as participants see it: rounded to ``decimals`` (floats, and the
        ``rounded_keys`` of a json list's entries)."""
        if value is None or self.decimals is None:
            return value
        if self.kind == "float":
            return round(value, self.decimals)
        return [
            {key: round(item, self.decimals) if key in self.rounded_keys and item is not None
             else item for key, item in entry.items()}
            for entry in value
        ]  # fmt: skip

    def computed(self, scores: Any) -> Any:
        """The value the worker stores, from its test scores (``None`` when the path meets a
        ``None``); dataclasses become mappings, sequences lists.

        Raises:
            ValueError: a figure without ``compute``.
        """
        if self.compute is None:
            raise ValueError(f"figure {self.name} is not computed from the test scores")
        if callable(self.compute):
            value = self.compute(scores)
        else:
            value = scores
            for attribute in self.compute.split("."):
                if value is None:
                    return None
                value = getattr(value, attribute)
        return _plain(value)


def _plain(value: Any) -> Any:
    """A dataclass as a mapping, a sequence as a list, recursively (JSON-ready)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {key: _plain(item) for key, item in dataclasses.asdict(value).items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def _score(name: str, label: str, **kwargs: Any) -> Figure:
    """A test score published to :data:`PUBLIC_DECIMALS` decimals."""
    return Figure(name, "float", label=label, decimals=PUBLIC_DECIMALS, **kwargs)


SHARED_FIGURES: tuple[Figure, ...] = (
    _score("anls", "ANLS", better="higher", description="test ANLS (Biten et al. 2019)"),
    _score("accuracy", "accuracy", short="acc", better="higher"),
    _score("anls_in", "ANLS in", short="in"),
    _score("anls_out", "ANLS out", short="out"),
    _score("accuracy_in", "accuracy in", shown=Shown.PAGE),
    _score("accuracy_out", "accuracy out", shown=Shown.PAGE),
    Figure("n_questions", "int", label="questions", shown=Shown.PAGE),
    Figure("n_in", "int", label="questions in", shown=Shown.PAGE),
    Figure("n_out", "int", label="questions out", shown=Shown.PAGE),
    Figure("total_bytes", "int", label="bytes", better="lower",
           description="bytes exchanged, both directions, as the evaluator tallied the log"),
    Figure("official_logger_total_bytes", "int", label="official logger",
           description="what the official starter kit's logger would have counted (as the "
           "published tables did), declared in submission.json: not checked, not ranked"),
    Figure("bytes_up", "int", label="bytes up", shown=Shown.PAGE),
    Figure("bytes_down", "int", label="bytes down", shown=Shown.PAGE),
    Figure("rounds", "int", shown=Shown.PAGE),
    Figure("messages", "int", shown=Shown.PAGE),
    Figure("per_round", "json", label="per-round tallies", shown=Shown.TEAM,
           description="per-round tallies, the first 1000 rounds at most"),
    Figure("epsilon", "float", label="epsilon", description="the privacy claim's epsilon"),
    Figure("delta", "float", label="delta", description="the privacy claim's delta"),
    Figure("privacy_verified", "bool", label="verified",
           description="whether the claim passed the accountant and the log cross-check"),
    Figure("privacy_report", "json", label="privacy report", shown=Shown.TEAM),
    Figure("audit_epsilon", "float", label="audit epsilon",
           description="privacy audit: empirical epsilon lower bound (95% confidence)"),
    Figure("audit_auc", "float", label="audit AUC", shown=Shown.PAGE),
    Figure("audit_tpr", "float", label="audit TPR", shown=Shown.PAGE,
           description="privacy audit: TPR at audit_fpr"),
    Figure("audit_fpr", "float", label="audit FPR", shown=Shown.PAGE),
    Figure("audit_seconds", "float", label="audit seconds", shown=Shown.PAGE),
    Figure("audit_contradicted", "bool", label="contradicted by audit",
           description="the privacy claim's epsilon is below the audit's lower bound"),
    Figure("audit_report", "json", label="audit report", shown=Shown.PAGE),
    Figure("scoring_seconds", "float", label="scoring seconds", shown=Shown.TEAM),
)  # fmt: skip
"""Every submission's figures, in the API's order: columns of the evaluator's ``submissions``
table (its migrations add a shared figure; a track's own figure needs none)."""


def figures_by_name(figures: Iterable[Figure]) -> dict[str, Figure]:
    """The figures by name.

    Raises:
        ValueError: two figures of the same name.
    """
    named: dict[str, Figure] = {}
    for figure in figures:
        if figure.name in named and named[figure.name] != figure:
            raise ValueError(f"two different figures are named {figure.name!r}")
        named[figure.name] = figure
    return named
