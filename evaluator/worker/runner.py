"""One scoring job: the claim with a lease, its heartbeat, the steps in order, one outcome.

The outcome is recorded only while this worker still holds the lease (the heartbeat renews it
while the checkpoint is scored); a worker that lost it discards its result, since the reaper
(``evaluator.worker.reaper``) has given the job to another.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import traceback
import uuid
from typing import Any

from benchmark.submission_contract import stored_name
from benchmark.tracks import common_parts, get_track
from evaluator import crud
from evaluator.canary_audit import CanaryAudit
from evaluator.core.config import Settings
from evaluator.core.db import session_scope
from evaluator.queue import TaskQueue
from evaluator.scoring import Scorer
from evaluator.storage import SubmissionStore
from evaluator.submission_metadata import SubmissionMetadata
from evaluator.tables import Status, Submission
from evaluator.validation import InvalidSubmission
from evaluator.validation.track_parts import check_track_parts
from evaluator.worker.liveness import WorkerPresence
from evaluator.worker.steps import ScoringSteps, computed_figures

logger = logging.getLogger("evaluator.worker")


def worker_name() -> str:
    """A unique name for this worker thread: host, process, and a random suffix."""
    return f"{socket.gethostname()[:24]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class _Heartbeat(threading.Thread):
    """Renews a job's lease until stopped; notes when the lease was lost."""

    def __init__(self, runner: JobRunner, submission_id: str, worker: str) -> None:
        super().__init__(name=f"heartbeat-{submission_id[:8]}", daemon=True)
        self.runner, self.submission_id, self.worker = runner, submission_id, worker
        self.stopped = threading.Event()
        self.lost = False

    def run(self) -> None:
        settings = self.runner.settings
        while not self.stopped.wait(settings.heartbeat_seconds):
            try:
                with session_scope(settings.db_url) as session:
                    held = crud.renew_lease(
                        session,
                        submission_id=self.submission_id,
                        worker=self.worker,
                        lease_seconds=settings.lease_seconds,
                    )
            except Exception as exc:  # a database hiccup: try again at the next beat
                logger.warning("heartbeat of %s failed: %s", self.submission_id, type(exc).__name__)
                continue
            if not held:
                self.lost = True
                logger.warning("lease of %s lost; its result will be discarded", self.submission_id)
                return


class JobRunner:
    """Runs scoring jobs in a worker process.

    Args:
        settings: the service settings (database, storage, data, limits).
        queue: the task queue, used to schedule retries.
        scorer: the test-split scorer (built from the settings when omitted).
        auditor: the privacy audit with the benchmark's canaries (built from the settings and
            the scorer's reference model when omitted).
    """

    def __init__(
        self,
        settings: Settings,
        queue: TaskQueue,
        scorer: Scorer | None = None,
        auditor: CanaryAudit | None = None,
    ) -> None:
        if settings.data_dir is None:
            raise ValueError(
                "the worker needs the benchmark directory: pass --data DIR "
                "(or set PFLKIT_EVALUATOR_DATA_DIR)"
            )
        self.settings = settings
        self.queue = queue
        self.store = SubmissionStore(settings.storage_dir)
        self.scorer = scorer or Scorer.from_settings(settings)
        self.auditor = auditor or CanaryAudit(
            settings.data_dir, lambda: self.scorer.reference_dir,
            batch_size=settings.batch_size, device=lambda: self.scorer.device,
            attack=settings.audit_attack,
        )  # fmt: skip
        self.steps = ScoringSteps(settings, self.scorer, self.auditor)
        self._family_steps: dict[str, ScoringSteps] = {}
        #: this worker's entry in the ``workers`` table (set by ``run_worker``): the jobs it
        #: holds are shown there.
        self.presence: WorkerPresence | None = None

    def steps_for(self, family: str) -> ScoringSteps:
        """The scoring steps of a submission of a model family: the reference's family's, or
        those of the organisers' reference of ``family`` (its scorer and canary audit).

        Raises:
            InvalidSubmission: the competition scores no checkpoint of that family.
        """
        scorer = self.scorer.for_family(family)
        if scorer is self.scorer:
            return self.steps
        if family not in self._family_steps:
            auditor = CanaryAudit(
                self.settings.data_dir, lambda: scorer.reference_dir,
                batch_size=self.settings.batch_size, device=lambda: scorer.device,
                attack=self.settings.audit_attack,
            )  # fmt: skip
            self._family_steps[family] = ScoringSteps(self.settings, scorer, auditor)
        return self._family_steps[family]

    def __call__(self, submission_id: str) -> str:
        """Score one submission if it can be claimed; returns the outcome."""
        return self.run(submission_id)

    def run(self, submission_id: str) -> str:
        """Claim, validate, score and record one submission.

        Args:
            submission_id: the submission.

        Returns:
            ``skipped`` (not claimable), ``finished``, ``rejected``, ``failed``, ``retrying`` or
            ``lost`` (another worker took the job over).
        """
        settings = self.settings
        worker = worker_name()
        with session_scope(settings.db_url) as session:
            if not crud.claim(
                session,
                submission_id=submission_id,
                worker=worker,
                lease_seconds=settings.lease_seconds,
            ):
                logger.info("submission %s is not claimable; skipped", submission_id)
                return "skipped"
        logger.info("scoring submission %s (%s)", submission_id, worker)
        heartbeat = _Heartbeat(self, submission_id, worker)
        heartbeat.start()
        if self.presence is not None:
            self.presence.hold(submission_id)
        try:
            values = self._evaluate(submission_id)
        except InvalidSubmission as exc:
            return self._finish(submission_id, worker, Status.REJECTED, detail=str(exc))
        except Exception as exc:
            frames = "".join(traceback.format_list(traceback.extract_tb(exc.__traceback__)))
            # The exception's message is left out on purpose: it could quote test data.
            logger.error("scoring %s raised %s at\n%s", submission_id, type(exc).__name__, frames)
            return self._fail(submission_id, worker, type(exc).__name__)
        finally:
            heartbeat.stopped.set()
            if self.presence is not None:
                self.presence.release(submission_id)
        return self._finish(submission_id, worker, Status.FINISHED, values=values)

    def _finish(
        self,
        submission_id: str,
        worker: str,
        status: Status,
        *,
        detail: str | None = None,
        values: dict[str, Any] | None = None,
    ) -> str:
        """Record the outcome if this worker still holds the lease."""
        with session_scope(self.settings.db_url) as session:
            done = crud.transition(
                session,
                submission_id=submission_id,
                from_status=Status.SCORING,
                to_status=status,
                detail=detail,
                worker=worker,
                lease_owner=worker,
                values=values,
            )
        if not done:
            logger.warning("submission %s was taken over; this result is discarded", submission_id)
            return "lost"
        logger.info("submission %s %s", submission_id, status.value)
        if status is Status.FINISHED:
            self._select_for_reproduction(submission_id)
        return status.value

    def _select_for_reproduction(self, submission_id: str) -> None:
        """Queue a finished submission's re-run when its track's policy says so."""
        from evaluator.worker.reproducer import selected

        with session_scope(self.settings.db_url) as session:
            row = session.get(Submission, submission_id)
            if row is not None and selected(self.settings, row.track):
                crud.queue_reproduction(session, submission_id=submission_id)

    def _fail(self, submission_id: str, worker: str, error: str) -> str:
        """Record an internal failure and schedule a retry while attempts remain."""
        with session_scope(self.settings.db_url) as session:
            row = session.get(Submission, submission_id)
            attempts = row.attempts if row else self.settings.max_attempts
            retry = attempts < self.settings.max_attempts
            detail = (
                f"internal error ({error}) on attempt {attempts} of "
                f"{self.settings.max_attempts}" + ("; retrying" if retry else "")
            )
            if not crud.transition(
                session,
                submission_id=submission_id,
                from_status=Status.SCORING,
                to_status=Status.FAILED,
                detail=detail,
                worker=worker,
                lease_owner=worker,
            ):
                return "lost"
            if retry:
                crud.transition(
                    session,
                    submission_id=submission_id,
                    from_status=Status.FAILED,
                    to_status=Status.QUEUED,
                    detail="automatic retry",
                    worker=worker,
                )
        if retry:
            self.queue.enqueue(submission_id, delay=self.settings.retry_delay_seconds)
            return "retrying"
        return "failed"

    def _evaluate(self, submission_id: str) -> dict[str, Any]:
        """Validate every part and score the checkpoint; returns the result columns."""
        settings = self.settings
        with session_scope(settings.db_url) as session:
            row = session.get(Submission, submission_id)
            if row is None:
                raise LookupError("submission row vanished")
            number, stored_metadata = row.track, dict(row.submission_metadata)
        try:
            metadata = SubmissionMetadata.model_validate(stored_metadata)
            track = get_track(number)
        except ValueError as exc:
            raise InvalidSubmission("metadata", str(exc).splitlines()[0]) from None
        directory = self.store.directory(submission_id)
        model_path = directory / stored_name("model")
        if not model_path.is_file():
            raise FileNotFoundError("stored submission is missing its checkpoint")
        steps = self.steps_for(metadata.family)
        steps.check_checkpoint(model_path)
        tally = steps.tally(directory, metadata, track)
        steps.bind(submission_id, directory, stored_metadata, tally)
        values: dict[str, Any] = {
            "total_bytes": tally.total_bytes,
            "official_logger_total_bytes": metadata.official_logger_bytes(),
            "bytes_up": tally.bytes_up,
            "bytes_down": tally.bytes_down,
            "rounds": len(tally.rounds),
            "messages": tally.messages,
            "per_round": tally.per_round(),
            "model_bytes": model_path.stat().st_size,
        }
        check_track_parts(track, directory, exclude=common_parts())
        for part in track.parts:
            if part in steps.part_steps:
                values.update(steps.part_steps[part](directory, tally, metadata))
            elif part not in common_parts():
                raise LookupError(f"track {track.number}'s part {part!r} has no scoring step")
        personal = None
        if "personal" in track.parts:
            personal = steps.personalisations(directory, check_values=False)
        scores = steps.scorer.score(model_path, personal)
        values.update(computed_figures(track, scores))
        values.update(
            anls=scores.anls,
            accuracy=scores.accuracy,
            anls_in=scores.anls_in,
            anls_out=scores.anls_out,
            accuracy_in=scores.accuracy_in,
            accuracy_out=scores.accuracy_out,
            n_questions=scores.n,
            n_in=scores.n_in,
            n_out=scores.n_out,
            scoring_seconds=scores.seconds,
        )
        values.update(
            steps.audit(
                model_path, values.get("epsilon"), values.get("delta"),
                values.get("privacy_report"),
            )
        )  # fmt: skip
        return values
