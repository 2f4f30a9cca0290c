"""The schema of ``submission.json``, the ``metadata`` part of an upload."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

import benchmark.model.families as families
from benchmark.model.families import DEFAULT_FAMILY, UnknownFamily, family_named
from benchmark.tracks import TRACKS, track_numbers


class PersonalMetadata(BaseModel):
    """``submission.json``'s ``personal`` (track 3)."""

    model_config = ConfigDict(extra="allow")

    #: the log round that sends the final global model to the clients before they personalise
    #: it (after the federated rounds; None when nothing is sent).
    log_round: int | None = Field(
        default=None, ge=0, le=1_000_000,
        description="the round that sent the final global model, or `null`",
        json_schema_extra={"checked": "must be the log's last round, after the declared ones, "
                                      "and is not counted in `rounds`"},
    )  # fmt: skip


class PretrainingMetadata(BaseModel):
    """``submission.json``'s ``pretraining``: federated pre-training rounds logged before the
    fine-tuning rounds (``evaluator.validation.commlog``)."""

    model_config = ConfigDict(extra="allow")

    rounds: int = Field(
        ge=1, le=1_000_000,
        description="the pre-training rounds, logged before the fine-tuning rounds",
        json_schema_extra={"checked": "the log's first `rounds` rounds must be them"},
    )  # fmt: skip
    clients_per_round: int = Field(
        ge=1, le=100_000, description="the clients each pre-training round samples",
        json_schema_extra={"checked": "every pre-training round of the log must involve this "
                                      "many distinct clients"},
    )  # fmt: skip


class SubmissionMetadata(BaseModel):
    """The ``metadata`` part of an upload (``submission.json`` of a run directory).

    ``rounds`` may be 0: track 3's ``local-only`` federates nothing.
    """

    model_config = ConfigDict(extra="allow")

    # Each field's description says what ``pflkit train`` writes there, its ``checked`` what
    # the evaluator checks beyond the type and the limits: the files reference
    # (docs/reference/files.md) is generated from them, with the keys of OTHER_KEYS below.
    track: int = Field(
        description="1, 2 or 3: track 3 when the run wrote personalisations, track 2 when it "
                    "wrote a privacy declaration, else 1",
        json_schema_extra={"checked": "a JSON integer that is a track number (`true` is "
                                      "refused); the upload's parts must be that track's"},
    )  # fmt: skip
    method: str = Field(min_length=1, max_length=200, description="the preset's name")
    description: str = Field(
        default="", max_length=10_000, description="free text (not written; add it by hand)"
    )
    clients: int | None = Field(
        default=None, ge=1, le=100_000, description="K, the federation's clients",
        json_schema_extra={"checked": "must be the benchmark's K"},
    )  # fmt: skip
    clients_per_round: int | None = Field(
        default=None, ge=1, le=100_000, description="M, the clients the server samples a round",
        json_schema_extra={"checked": "checked against every round of the CSV log (see "
                                      "`sampling`)"},
    )  # fmt: skip
    rounds: int | None = Field(
        default=None, ge=0, le=1_000_000, description="federated rounds (0 for `local-only`)",
        json_schema_extra={"checked": "must be the CSV log's rounds (its pre-training rounds "
                                      "and track 3's personalisation round apart)"},
    )  # fmt: skip
    sampling: Literal["fixed", "poisson"] | None = Field(
        default=None, description="how the server sampled the clients of a round (not written)",
        json_schema_extra={"checked": "without it or with `fixed` every round of the log must "
                                      "have exactly `clients_per_round` clients, with `poisson` "
                                      "at most that many"},
    )  # fmt: skip
    personal: PersonalMetadata | None = Field(
        default=None,
        description="track 3: `directory`, `personalised_clients`, `tensors_per_client`, "
                    "`bytes`, `log_round`",
        json_schema_extra={"checked": "`log_round` is checked against the log"},
    )  # fmt: skip
    pretraining: PretrainingMetadata | None = Field(
        default=None,
        description="`--fsp-rounds`: `rounds`, `clients_per_round`, `strategy`, `server_lr`, "
                    "`lr`, `objectives`, `log_rounds`, `added_tokens`",
        json_schema_extra={"checked": "the log's first `rounds` rounds must be them; track 2 "
                                      "refuses a pre-training phase"},
    )  # fmt: skip
    family: str = Field(
        default=DEFAULT_FAMILY, min_length=1, max_length=40,
        description="the base checkpoint's model family (`vt5`, `pix2struct`, `idefics3`)",
        json_schema_extra={"checked": "a family of the kit, and one the competition holds a "
                                      "reference of, else rejected naming those it scores"},
    )  # fmt: skip

    @field_validator("track", mode="before")
    @classmethod
    def _integer_track(cls, value: Any) -> Any:
        """A track of ``benchmark.tracks.TRACKS``, read when validated (a track added later
        counts); ``true`` equals 1 in Python but is no track number: only JSON integers are."""
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"track must be a JSON integer, got {value!r}")
        if value not in TRACKS:
            raise ValueError(f"track must be {track_numbers()}, got {value}")
        return value

    @field_validator("family")
    @classmethod
    def _known_family(cls, value: str) -> str:
        """A model family of the kit (``benchmark.model.families``): the checkpoint is built
        with that family's architecture and the organisers' reference of it."""
        try:
            family_named(value)
        except UnknownFamily:
            known = ", ".join(families.FAMILIES)  # read now: a family may be added at run time
            raise ValueError(
                f"family must be a model family of the kit ({known}), got {value[:40]!r}"
            ) from None
        return value

    def official_logger_bytes(self) -> int | None:
        """The declared ``official_logger_total_bytes``: what the official starter kit's logger
        would have counted for the run (``pflkit train`` writes it), the figure of the
        competition's published tables.

        Shown beside the evaluator's own tally, never ranked and not checked, so a missing or
        malformed value is not an error.

        Returns:
            The value when it is a JSON integer in 0 .. 2**63 - 1, else None.
        """
        value = (self.model_extra or {}).get("official_logger_total_bytes")
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
            return None
        return value


#: The keys ``pflkit train`` writes (``baselines.submission``) beyond the schema's fields, which
#: the schema keeps as they are (``extra="allow"``): keys -> (what ``pflkit train`` writes, what
#: the evaluator does with them). The files reference (docs/reference/files.md) lists them.
OTHER_KEYS: dict[tuple[str, ...], tuple[str, str]] = {
    ("local_epochs", "strategy", "wire_format", "method_options"): (
        "the run's settings",
        "every message must be in `wire_format`; a LoRA method's `method_options.rank` (or "
        "`method_options.inner.rank` under a DP wrapper) bounds the rank of what travelled as "
        "an adapter",
    ),
    ("server",): (
        '`{"strategy", "lr", "momentum"}`: the server\'s step', "track 2's noise floor reads it"
    ),
    ("messages", "total_bytes"): (
        "the log's message count and byte sum", "must equal the CSV log's"
    ),
    ("bytes_downlink", "bytes_uplink", "bytes_per_message"): (
        "the byte totals per direction; the size of every message (a list of the sizes when "
        "they differ)",
        "not used: the evaluator tallies the log itself",
    ),
    ("official_logger_total_bytes",): (
        "the official logger's count of the whole run",
        "shown beside the evaluator's tally, not checked, never ranked",
    ),
    ("val_anls",): ("the last round's validation ANLS (`null` without validation)", "not used"),
    ("checkpoint",): ('`"checkpoint"`', "not used"),
    ("data_dir", "base", "train_questions", "val_questions", "communicated_parameters",
     "timing"): ("where and what the run trained, its timings", "not used"),
}  # fmt: skip
