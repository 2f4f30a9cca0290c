"""The checks and scores of one stored submission, in the order the job runner calls them.

Every track's submission has its checkpoint checked against the reference, its communication
log tallied and bound to the checkpoint, and its model audited; the parts only some tracks need
(``benchmark.tracks``) each have a step in :attr:`ScoringSteps.part_steps`. Each step reads the
stored files within the settings' limits and returns result columns, or raises
``InvalidSubmission`` with the reason the team is shown.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmark.submission_contract import stored_name
from benchmark.tracks import Track
from evaluator.canary_audit import CLAIM_BASES, CanaryAudit, audited_claim, contradicted
from evaluator.core.config import Settings
from evaluator.federation import federation_of
from evaluator.scoring import Scorer
from evaluator.submission_metadata import SubmissionMetadata
from evaluator.validation import InvalidSubmission
from evaluator.validation.binding import bind
from evaluator.validation.checkpoint import validate_checkpoint
from evaluator.validation.commdetails import read_details
from evaluator.validation.commlog import CommunicationTally, declared_shape, parse_log
from evaluator.validation.noise_floor import check_submission as check_noise_floor
from evaluator.validation.personal import (
    check_personalisations,
    declared_frozen,
    frozen_replacements,
)
from evaluator.validation.privacy import load_declaration, verify_declaration

logger = logging.getLogger("evaluator.worker")
#: a part's scoring step: (stored directory, the log's tally, metadata) -> result columns.
PartStep = Callable[[Path, CommunicationTally, SubmissionMetadata], dict[str, Any]]


class ScoringSteps:
    """The steps that check and score a stored submission.

    Args:
        settings: the service settings (data directory and limits).
        scorer: the test-split scorer (the reference model and the benchmark's clients).
        auditor: the privacy audit with the benchmark's canaries.
    """

    def __init__(self, settings: Settings, scorer: Scorer, auditor: CanaryAudit) -> None:
        self.settings, self.scorer, self.auditor = settings, scorer, auditor
        #: scoring steps of the parts only some tracks need (``benchmark.tracks``), keyed by
        #: part: each reads its stored file and returns result columns. They run after the
        #: checks every track shares and before the costly test-set scoring, which scores
        #: track 3's personalisations with the global model (:meth:`Scorer.score`).
        self.part_steps: dict[str, PartStep] = {
            "privacy": self.verify_privacy,
            "personal": self.check_personal,
        }

    def check_checkpoint(self, model_path: Path) -> None:
        """The checkpoint's header and tensors checked against the reference's."""
        validate_checkpoint(
            model_path,
            self.scorer.expected_spec,
            max_header_bytes=self.settings.max_header_bytes,
            max_tensors=self.settings.max_tensors,
        )

    def tally(
        self, directory: Path, metadata: SubmissionMetadata, track: Track
    ) -> CommunicationTally:
        """The communication log parsed and tallied, within the shape the metadata declares."""
        settings = self.settings
        return parse_log(
            directory / stored_name("communication_log"),
            clients=self.scorer.clients,
            max_bytes=settings.max_log_bytes,
            max_rows=settings.max_log_rows,
            **declared_shape(metadata, track),
            max_rounds=settings.max_log_rounds,
            max_messages_per_round=2 * self.scorer.clients * settings.max_messages_per_client_round,
        )

    def bind(
        self,
        submission_id: str,
        directory: Path,
        metadata: dict[str, Any],
        tally: CommunicationTally,
    ) -> None:
        """The detailed log matched to the CSV, and both logs and the metadata bound to the
        checkpoint (:mod:`evaluator.validation.binding`)."""
        path = directory / stored_name("communication_details")
        if not path.is_file():
            raise InvalidSubmission(
                "communication_details",
                "the submission has no detailed communication log (communication_log.jsonl); "
                "submit the run directory again with it (pflkit submit sends it)",
            )
        messages = read_details(
            path, tally.rows, max_bytes=self.settings.max_details_bytes,
            max_parameters=2 * self.settings.max_tensors,
        )  # fmt: skip
        report = bind(
            directory / stored_name("model"), self.scorer.reference, metadata, tally, messages,
            clients=self.scorer.clients,
        )  # fmt: skip
        logger.info("submission %s is bound to its logs: %s", submission_id, report.summary())

    def personalisations(self, directory: Path, *, check_values: bool = True) -> Any:
        """The stored ``personal/`` checked against the benchmark's K and the reference's
        tensors, within the settings' limits."""
        return check_personalisations(
            directory / stored_name("personal"), self.scorer.expected_spec, self.scorer.clients,
            max_file_bytes=self.settings.max_personal_file_bytes,
            max_total_bytes=self.settings.max_personal_bytes, check_values=check_values,
        )  # fmt: skip

    def check_personal(
        self, directory: Path, tally: CommunicationTally, metadata: SubmissionMetadata
    ) -> dict[str, Any]:
        """Track 3: every personalisation checked (values included), and flagged when it
        replaces tensors the method declared frozen (never sent): those are accepted, and the
        report tells the organisers that the log must count whatever produced them."""
        personal = self.personalisations(directory)
        frozen = declared_frozen(metadata.model_dump(mode="json"))
        touched = frozen_replacements(personal, frozen)
        report = {
            "files_bytes": personal.total_bytes,
            "personalised_clients": [k for k in range(personal.clients)
                                     if not personal.is_empty(k)],
            "declared_frozen": list(frozen),
            "frozen_replaced": {str(k): len(names) for k, names in touched.items()},
            "log_bytes": tally.total_bytes,
        }  # fmt: skip
        if touched:
            report["flag"] = (
                f"the personalisations of client(s) {sorted(touched)} replace tensors under "
                f"the declared-frozen prefixes {list(frozen)}; the log must count the bytes "
                "of whatever produced them"
            )
        return {"personal_report": report}

    def verify_privacy(
        self, directory: Path, tally: CommunicationTally, metadata: SubmissionMetadata
    ) -> dict[str, Any]:
        """The privacy declaration verified with the accountant against the log's tally."""
        declaration = load_declaration(
            directory / stored_name("privacy"), max_bytes=self.settings.max_json_bytes
        )
        verified, report = verify_declaration(
            declaration, tally, federation=federation_of(self.settings.data_dir)
        )
        report["noise_floor"] = self._noise_floor(directory, tally, metadata, declaration)
        return {
            "epsilon": float(declaration.epsilon),
            "delta": float(declaration.delta),
            "privacy_verified": verified,
            "privacy_report": report,
        }

    def _noise_floor(
        self,
        directory: Path,
        tally: CommunicationTally,
        metadata: SubmissionMetadata,
        declaration: Any,
    ) -> dict[str, Any]:
        """Track 2's noise floor (:mod:`evaluator.validation.noise_floor`): the declared noise
        must be in the communicated coordinates' change from the base.

        Raises:
            InvalidSubmission: the change carries less (or more) than the declaration implies.
        """
        messages = read_details(
            directory / stored_name("communication_details"), tally.rows,
            max_bytes=self.settings.max_details_bytes,
            max_parameters=2 * self.settings.max_tensors,
        )  # fmt: skip
        return check_noise_floor(
            directory / stored_name("model"), self.scorer.reference,
            metadata.model_dump(mode="json"), declaration, messages,
            data_dir=self.settings.data_dir,
        )  # fmt: skip

    def audit(
        self,
        model_path: Path,
        epsilon: float | None,
        delta: float | None,
        privacy_report: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The one-run privacy audit of the submitted model (every track; skipped, and said
        so, when the benchmark has no canaries), and whether it contradicts the claim: the
        declared mechanism's epsilon (:func:`evaluator.canary_audit.audited_claim`)."""
        if not self.auditor.available:
            return self.auditor.audit(None, delta)
        model = self.scorer.build_model(model_path).to(self.scorer.device)
        columns = self.auditor.audit(model, delta)
        del model
        tested, basis = audited_claim(epsilon, (privacy_report or {}).get("accountant"))
        flagged = contradicted(tested, columns["audit_epsilon"])
        columns["audit_contradicted"] = flagged if epsilon is not None else None
        if tested is not None:
            columns["audit_report"]["claim_tested"] = {
                "epsilon": tested, "declared_epsilon": epsilon, "basis": CLAIM_BASES[basis],
            }  # fmt: skip
        if flagged:
            columns["audit_report"]["flag"] = (
                f"{CLAIM_BASES[basis]} ({tested:.3f}; declared {epsilon:g}) is below the "
                f"audit's lower bound {columns['audit_epsilon']:.3f} (95% confidence): "
                "contradicted by audit"
            )
        return columns


def computed_figures(track: Track, scores: Any) -> dict[str, Any]:
    """The track's own figures that the worker computes from its test scores (each
    ``Figure.compute``; a figure a part's scoring step returns is that step's)."""
    return {figure.name: figure.computed(scores) for figure in track.figures
            if figure.compute is not None}  # fmt: skip
