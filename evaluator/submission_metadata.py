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
    log_round: int | None = Field(default=None, ge=0, le=1_000_000)


class PretrainingMetadata(BaseModel):
    """``submission.json``'s ``pretraining``: federated pre-training rounds logged before the
    fine-tuning rounds (``evaluator.validation.commlog``)."""

    model_config = ConfigDict(extra="allow")

    rounds: int = Field(ge=1, le=1_000_000)
    clients_per_round: int = Field(ge=1, le=100_000)


class SubmissionMetadata(BaseModel):
    """The ``metadata`` part of an upload (``submission.json`` of a run directory).

    ``rounds`` may be 0: track 3's ``local-only`` federates nothing.
    """

    model_config = ConfigDict(extra="allow")

    track: int
    method: str = Field(min_length=1, max_length=200)
    description: str = Field(default="", max_length=10_000)
    clients: int | None = Field(default=None, ge=1, le=100_000)
    clients_per_round: int | None = Field(default=None, ge=1, le=100_000)
    rounds: int | None = Field(default=None, ge=0, le=1_000_000)
    sampling: Literal["fixed", "poisson"] | None = None
    personal: PersonalMetadata | None = None
    pretraining: PretrainingMetadata | None = None
    family: str = Field(default=DEFAULT_FAMILY, min_length=1, max_length=40)

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
