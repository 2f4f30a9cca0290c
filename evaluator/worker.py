"""The scoring worker: claims a submission with a lease, validates and scores it, records once.

A job moves ``queued -> scoring`` by an atomic claim that sets a lease; a heartbeat thread
renews the lease while the checkpoint is scored. The result is written only while this worker
still holds the lease, so if a worker is killed (or stalls past its lease) the reaper re-queues
the job, another worker scores it, and exactly one result is kept. Invalid input ends in
``rejected`` with the reason; an error on our side ends in ``failed`` and is retried up to
``max_attempts`` times.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmark.tracks import get_track
from evaluator import crud
from evaluator.canary_audit import CanaryAudit, contradicted
from evaluator.core.config import Settings
from evaluator.core.db import session_scope
from evaluator.federation import federation_of
from evaluator.models import Status, Submission, SubmissionMetadata, utcnow
from evaluator.queue import TaskQueue
from evaluator.readiness import ThresholdAtOrBelowBase, check_readiness
from evaluator.scoring import Scorer
from evaluator.storage import FILENAMES, REQUIRED_PARTS, SubmissionStore
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
from evaluator.validation.track_parts import check_track_parts

logger = logging.getLogger("evaluator.worker")
#: a part's scoring step: (stored directory, the log's tally, metadata) -> result columns.
PartStep = Callable[[Path, CommunicationTally, SubmissionMetadata], dict[str, Any]]


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
        #: scoring steps of the parts only some tracks need (``benchmark.tracks``), keyed by
        #: part: each reads its stored file and returns result columns. They run after the
        #: checks every track shares and before the costly test-set scoring, which scores
        #: track 3's personalisations with the global model (:meth:`Scorer.score`).
        self.part_steps: dict[str, PartStep] = {
            "privacy": self._verify_privacy,
            "personal": self._check_personal,
        }

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
        return status.value

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
        model_path = directory / FILENAMES["model"]
        if not model_path.is_file():
            raise FileNotFoundError("stored submission is missing its checkpoint")
        validate_checkpoint(
            model_path,
            self.scorer.expected_spec,
            max_header_bytes=settings.max_header_bytes,
            max_tensors=settings.max_tensors,
        )
        tally = parse_log(
            directory / FILENAMES["communication_log"],
            clients=self.scorer.clients,
            max_bytes=settings.max_log_bytes,
            max_rows=settings.max_log_rows,
            **declared_shape(metadata, track),
            max_rounds=settings.max_log_rounds,
            max_messages_per_round=2 * self.scorer.clients * settings.max_messages_per_client_round,
        )
        self._bind(submission_id, directory, stored_metadata, tally)
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
        check_track_parts(track, directory, exclude=REQUIRED_PARTS)
        for part in track.parts:
            if part in self.part_steps:
                values.update(self.part_steps[part](directory, tally, metadata))
            elif part not in REQUIRED_PARTS:
                raise LookupError(f"track {track.number}'s part {part!r} has no scoring step")
        personal = None
        if "personal" in track.parts:
            personal = self._personalisations(directory, check_values=False)
        scores = self.scorer.score(model_path, personal)
        if scores.personal is not None:
            values.update(personal_columns(scores.personal))
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
        values.update(self._audit(model_path, values.get("epsilon"), values.get("delta")))
        return values

    def _audit(
        self, model_path: Path, epsilon: float | None, delta: float | None
    ) -> dict[str, Any]:
        """The one-run privacy audit of the submitted model (every track; skipped, and said
        so, when the benchmark has no canaries), and whether it contradicts the claim."""
        if not self.auditor.available:
            return self.auditor.audit(None, delta)
        model = self.scorer.build_model(model_path).to(self.scorer.device)
        columns = self.auditor.audit(model, delta)
        del model
        flagged = contradicted(epsilon, columns["audit_epsilon"])
        columns["audit_contradicted"] = flagged if epsilon is not None else None
        if flagged:
            columns["audit_report"]["flag"] = (
                f"claimed epsilon {epsilon:g} is below the audit's lower bound "
                f"{columns['audit_epsilon']:.3f} (95% confidence): contradicted by audit"
            )
        return columns

    def _bind(
        self,
        submission_id: str,
        directory: Path,
        metadata: dict[str, Any],
        tally: CommunicationTally,
    ) -> None:
        """The detailed log matched to the CSV, and both logs and the metadata bound to the
        checkpoint (:mod:`evaluator.validation.binding`)."""
        path = directory / FILENAMES["communication_details"]
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
            directory / FILENAMES["model"], self.scorer.reference, metadata, tally, messages,
            clients=self.scorer.clients,
        )  # fmt: skip
        logger.info("submission %s is bound to its logs: %s", submission_id, report.summary())

    def _personalisations(self, directory: Path, *, check_values: bool = True) -> Any:
        """The stored ``personal/`` checked against the benchmark's K and the reference's
        tensors, within the settings' limits."""
        return check_personalisations(
            directory / FILENAMES["personal"], self.scorer.expected_spec, self.scorer.clients,
            max_file_bytes=self.settings.max_personal_file_bytes,
            max_total_bytes=self.settings.max_personal_bytes, check_values=check_values,
        )  # fmt: skip

    def _check_personal(
        self, directory: Path, tally: CommunicationTally, metadata: SubmissionMetadata
    ) -> dict[str, Any]:
        """Track 3: every personalisation checked (values included), and flagged when it
        replaces tensors the method declared frozen (never sent): those are accepted, and the
        report tells the organisers that the log must count whatever produced them."""
        personal = self._personalisations(directory)
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

    def _verify_privacy(
        self, directory: Path, tally: CommunicationTally, metadata: SubmissionMetadata
    ) -> dict[str, Any]:
        """The privacy declaration verified with the accountant against the log's tally."""
        declaration = load_declaration(
            directory / FILENAMES["privacy"], max_bytes=self.settings.max_json_bytes
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


    def _noise_floor(self, directory: Path, tally: CommunicationTally,
                     metadata: SubmissionMetadata, declaration: Any) -> dict[str, Any]:  # fmt: skip
        """Track 2's noise floor (:mod:`evaluator.validation.noise_floor`): the declared noise
        must be in the communicated coordinates' change from the base.

        Raises:
            InvalidSubmission: the change carries less (or more) than the declaration implies.
        """
        messages = read_details(
            directory / FILENAMES["communication_details"], tally.rows,
            max_bytes=self.settings.max_details_bytes,
            max_parameters=2 * self.settings.max_tensors,
        )  # fmt: skip
        return check_noise_floor(
            directory / FILENAMES["model"], self.scorer.reference,
            metadata.model_dump(mode="json"), declaration, messages,
            data_dir=self.settings.data_dir,
        )  # fmt: skip


def personal_columns(result: Any) -> dict[str, Any]:
    """The result columns of track 3's figures (a ``PersonalisedResult``)."""
    return {
        "personal_anls": result.personal_anls,
        "personal_anls_std": result.personal_anls_std,
        "personal_worst_client": result.worst_client,
        "personal_worst_anls": result.worst_anls,
        "global_personal_anls": result.global_personal_anls,
        "global_unseen_anls": result.unseen_anls,
        "n_personal": result.n,
        "personal_clients": [
            {"client": c.client, "n": c.n, "personal_anls": c.personal_anls,
             "global_anls": c.global_anls, "personalised": c.personalised}
            for c in result.clients
        ],
    }  # fmt: skip


def reap(settings: Settings, queue: TaskQueue, store: SubmissionStore) -> dict[str, int]:
    """Recover jobs after crashes; run periodically by every worker (idempotent).

    * ``scoring`` with an expired lease (its worker died): back to ``queued`` and re-sent, or
      ``failed`` once ``max_attempts`` workers have died on it.
    * ``received`` for longer than ``received_timeout_seconds`` (the upload died with the
      server): ``failed`` and its files removed.
    * ``queued`` while the queue is empty (a task lost between commit and enqueue, or with a
      killed worker): re-sent.

    Args:
        settings: the service settings.
        queue: the task queue.
        store: the upload storage.

    Returns:
        How many submissions were re-queued, failed and re-sent.
    """
    now = utcnow()
    counts = {"requeued": 0, "failed": 0, "resent": 0}
    with session_scope(settings.db_url) as session:
        expired = crud.expired_leases(session, now=now)
    for submission_id in expired:
        with session_scope(settings.db_url) as session:
            moved = crud.requeue_expired(
                session, submission_id=submission_id, now=now, max_attempts=settings.max_attempts
            )
        if moved == Status.QUEUED:
            queue.enqueue(submission_id)
            counts["requeued"] += 1
        elif moved == Status.FAILED:
            counts["failed"] += 1
    stale_before = now - dt.timedelta(seconds=settings.received_timeout_seconds)
    with session_scope(settings.db_url) as session:
        for submission_id in crud.stale_received(session, older_than=stale_before):
            if crud.transition(
                session,
                submission_id=submission_id,
                from_status=Status.RECEIVED,
                to_status=Status.FAILED,
                detail="the upload did not complete",
            ):
                store.discard(submission_id)
                counts["failed"] += 1
    if queue.pending() == 0:
        settle = now - dt.timedelta(seconds=settings.reap_interval_seconds)
        with session_scope(settings.db_url) as session:
            waiting = crud.queued(session, older_than=settle)
        for submission_id in waiting:
            queue.enqueue(submission_id)
            counts["resent"] += 1
    if any(counts.values()):
        logger.info("reaper: %s", counts)
    return counts


class Reaper(threading.Thread):
    """Runs :func:`reap` every ``reap_interval_seconds`` (and at once on start)."""

    def __init__(
        self, settings: Settings, queue: TaskQueue, *, parent_pid: int | None = None
    ) -> None:
        super().__init__(name="reaper", daemon=True)
        self.settings, self.queue = settings, queue
        self.store = SubmissionStore(settings.storage_dir)
        self.stopped = threading.Event()
        self.parent_pid = parent_pid

    def run(self) -> None:
        while True:
            try:
                reap(self.settings, self.queue, self.store)
            except Exception as exc:
                logger.warning("reaper pass failed: %s", type(exc).__name__)
            if self.parent_pid is not None and os.getppid() != self.parent_pid:
                logger.warning(
                    "parent process %s is gone; stopping the embedded worker", self.parent_pid
                )
                os.kill(os.getpid(), 15)
                return
            if self.stopped.wait(self.settings.reap_interval_seconds):
                return


def run_worker(settings: Settings, *, parent_pid: int | None = None) -> None:
    """Run a scoring worker until SIGINT/SIGTERM (the body of ``pflkit worker``).

    Args:
        settings: the service settings.
        parent_pid: for the worker embedded in ``pflkit serve``: stop when that process dies.
    """
    from evaluator.core.db import migrate
    from evaluator.queue import install_handler

    migrate(settings.db_url)
    if settings.torch_threads:
        import torch

        torch.set_num_threads(settings.torch_threads)
    queue = TaskQueue(settings.queue, name=settings.queue_name)
    runner = JobRunner(settings, queue)
    started = time.perf_counter()
    runner.scorer.prepare()
    runner.auditor.prepare()
    # The threshold in force: benchmark.json, else the setting (the leaderboard's lookup too).
    from benchmark.threshold import track1_threshold

    try:
        check_readiness(runner, threshold=track1_threshold(settings.data_dir))
    except ThresholdAtOrBelowBase as exc:
        raise SystemExit(f"pflkit worker: refusing to start: {exc}") from None
    logger.info(
        "worker ready in %.1f s (test split, reference model and canary baseline loaded, "
        "base model scored)",
        time.perf_counter() - started,
    )
    install_handler(runner)
    reaper = Reaper(settings, queue, parent_pid=parent_pid)
    reaper.start()
    consumer = queue.huey.create_consumer(
        workers=settings.worker_threads,
        worker_type="thread",
        initial_delay=0.05,
        backoff=1.5,
        max_delay=1.0,
        check_worker_health=True,
    )
    try:
        consumer.run()
    finally:
        reaper.stopped.set()
